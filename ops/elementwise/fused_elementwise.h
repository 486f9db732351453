// fused_elementwise: a group of elementwise ops run as one op. The CPU path runs the group's own
// ops one by one; the CUDA path launches one kernel generated for the group (NVRTC).
#pragma once

#include <string>
#include <vector>

#include "ops/core/op.h"
#include "ops/elementwise/pointwise.h"

namespace tg {

// Where a step of a fused group reads an operand: an input of the fused op or an earlier step's result.
struct FusedOperand {
  bool from_step = false;
  int index = 0;
};

// One op of a fused group.
struct FusedStep {
  OpPtr op;                            // the original op (what the CPU path runs)
  PointwiseMath math;                  // what it computes (what the CUDA kernel is generated from)
  std::vector<FusedOperand> operands;  // in the op's input order
  DType dtype = kFloat32;              // its result's dtype
};

// A fused group in execution order; the last step's result is the group's output.
struct FusedProgram {
  std::vector<DType> input_dtypes;
  std::vector<FusedStep> steps;

  // "mul(in0, in1) -> t0; tanh(t0) -> t1", for printing and error messages.
  std::string describe() const;
  // Everything the generated code depends on besides the operands' layout (ops, dtypes, operand
  // wiring, constants to the bit): equal signatures generate equal kernels for equal layouts.
  std::string signature() const;
};

// Runs a FusedProgram. Inputs must have the program's dtypes, share one device and broadcast
// together; the output has their broadcast shape (every step is elementwise, so the group's
// output shape is the broadcast of all its inputs) and the last step's dtype.
class FusedElementwiseOp final : public Op {
 public:
  explicit FusedElementwiseOp(FusedProgram program)
      : program_(std::move(program)), signature_(program_.signature()) {}
  const OpSchema& schema() const override;
  std::vector<TensorMeta> infer(const TensorList& inputs) const override;
  void eval(const TensorList& inputs, TensorList& outputs) const override;
  std::string attrs() const override { return program_.describe(); }
  // The group this op runs.
  const FusedProgram& program() const { return program_; }

 private:
  FusedProgram program_;
  std::string signature_;
};

// A fused_elementwise op running `program` (at least one step).
OpPtr fused_elementwise_op(FusedProgram program);

}  // namespace tg
