// The op contract: one class per op (or op family) holding its schema, shape rule, kernels and VJP.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tensor/tensor.h"
#include "tensor/tensor_meta.h"

namespace tg {

// Properties of an op that the dispatcher, the tape and (later) the graph passes read.
enum OpFlag : uint32_t {
  kElementwise = 1u << 0,
  kView = 1u << 1,          // outputs alias input `view_of` (no data is written)
  kInPlace = 1u << 2,       // writes input `mutates` and returns it
  kFactory = 1u << 3,       // has no tensor inputs
  kRandom = 1u << 4,        // draws from the Philox generator
  kDeviceCopy = 1u << 5,    // moves data between devices
  kHostSync = 1u << 6,      // reads values on the host
  kNonDifferentiable = 1u << 7,  // outputs never require grad (comparisons, argmax, integer results)
  kMetadataMutation = 1u << 8,   // changes sizes/storage of input `mutates` (resize_, set_)
  kOverwritesTarget = 1u << 9,   // in-place op that writes every element of its target without reading it
  kCollective = 1u << 10,        // exchanges data with other processes: never recomputed, folded or skipped
  kComputeIntensive = 1u << 11,  // matrix products, convolutions, recurrences, attention: saved, never recomputed
  kStreamWait = 1u << 12,        // a view whose eval makes the current stream wait for work queued elsewhere: it runs
};

// Static description of an op; `mutates` and `view_of` name an input index or are -1.
struct OpSchema {
  std::string_view name;
  uint32_t flags = 0;
  int mutates = -1;
  int view_of = -1;
  // Inputs written in place besides `mutates` (multi-tensor updates such as fused optimizer steps).
  // Ops that set it are kNonDifferentiable and return every written input, `mutates` first.
  std::vector<int> also_mutates = {};
};

// Every input the op writes: `mutates` first, then `also_mutates`; empty for out-of-place ops.
std::vector<int> mutated_inputs(const OpSchema& s);

// What the tape must keep for this op's backward.
struct SaveSpec {
  bool inputs = true;
  bool outputs = false;
  uint32_t output_mask = ~0u;  // with `outputs`: bit i keeps output i (an op's big outputs need not be kept)
  uint32_t input_mask = ~0u;   // with `inputs`: bit i keeps input i (inputs the backward never reads need not)
};

class BackwardContext;
struct PointwiseMath;

// One op: schema, shape rule (runs without data), kernels, and its vector-Jacobian product.
class Op {
 public:
  virtual ~Op() = default;
  virtual const OpSchema& schema() const = 0;
  // Output metadata from input metadata alone; validates and throws tg::Error on bad input.
  virtual std::vector<TensorMeta> infer(const TensorList& inputs) const = 0;
  // For ops that write an input (whose outputs are that input): validates exactly as infer() does,
  // without building metadata the dispatcher has no use for. Hot in-place ops override it.
  virtual void validate_in_place(const TensorList& inputs) const { (void)infer(inputs); }
  // Fills `outputs` (allocated by the dispatcher, or views/in-place targets) from `inputs`.
  virtual void eval(const TensorList& inputs, TensorList& outputs) const = 0;
  // Gradients w.r.t. each input given gradients w.r.t. each output, written with tg ops so the
  // result is itself differentiable; an undefined Tensor means "no gradient" for that input.
  virtual TensorList backward(const BackwardContext& ctx, const TensorList& grad_outputs) const;
  // Which tensors the tape saves for backward.
  virtual SaveSpec saves() const { return {}; }
  // False when backward() takes an undefined gradient for an output that received none (its
  // statistics outputs, say) instead of a tensor of zeros made for it.
  virtual bool needs_zero_filled_grads() const { return true; }
  // Out-of-place elementwise ops that a fusion may inline fill `math` (ops/elementwise/pointwise.h) for inputs of
  // metadata `inputs` and return true; every other op returns false and is never fused.
  virtual bool pointwise(const std::vector<TensorMeta>& inputs, PointwiseMath& math) const;
  // The op's attributes for printing, e.g. "dim=1, keepdim=true".
  virtual std::string attrs() const { return {}; }
  // Random ops (kRandom) override this: the same op drawing fresh numbers (a new generator state),
  // so that a graph run again never repeats the draws of its trace.
  virtual std::shared_ptr<const Op> redraw() const;

  std::string_view name() const { return schema().name; }
  bool has(OpFlag f) const { return (schema().flags & f) != 0; }
};

using OpPtr = std::shared_ptr<const Op>;

// What backward() sees: the saved inputs/outputs (version-checked on access) and input metadata.
class BackwardContext {
 public:
  virtual ~BackwardContext() = default;
  // Saved input i; requires SaveSpec::inputs.
  virtual Tensor input(size_t i) const = 0;
  // Saved output i; requires SaveSpec::outputs.
  virtual Tensor output(size_t i) const = 0;
  // Metadata of input i as it was in the forward pass (always available).
  virtual const TensorMeta& input_meta(size_t i) const = 0;
  // True when input i needs a gradient (others may be returned undefined).
  virtual bool needs_input_grad(size_t i) const = 0;
};

}  // namespace tg
