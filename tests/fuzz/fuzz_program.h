// The differential fuzzer's programs: a few inputs and a straight-line sequence of op applications,
// each reading earlier values. A program runs eagerly or inside compile() through run_program, and
// prints itself as C++ (print_program) so that a mismatch comes with a reproducer.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "tapegraph.h"

namespace tg::fuzz {

// The random source of one program (a seed fixes the whole program).
class Rng {
 public:
  explicit Rng(uint64_t seed) : engine_(seed) {}
  // Uniform in [lo, hi].
  int64_t between(int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(engine_); }
  // True with probability p.
  bool chance(double p) { return std::bernoulli_distribution(p)(engine_); }
  // One element of a non-empty list.
  template <typename T>
  const T& pick(const std::vector<T>& items) {
    return items[static_cast<size_t>(between(0, static_cast<int64_t>(items.size()) - 1))];
  }

 private:
  std::mt19937_64 engine_;
};

// Integer and real attributes of one op application (dims, sizes, scalars), as the op defines them.
struct Attrs {
  std::vector<int64_t> ints;
  std::vector<double> reals;
  std::shared_ptr<nn::Module> module;  // a module op's layer (its parameters are the program's)
  int first_param = 0;                 // the index of the module's first parameter among the program's
};

// One input of a program.
struct InputSpec {
  Shape sizes;
  DType dtype = kFloat32;
  bool requires_grad = false;
  bool transposed = false;  // made as the transpose of a contiguous tensor (non-contiguous strides)
};

// value[result] = op(value[operands]...; attrs). Values 0..inputs-1 are the inputs.
struct Statement {
  int op = 0;  // index into fuzz_ops()
  std::vector<int> operands;
  Attrs attrs;
  DType dtype = kFloat32;  // the result's dtype when the statement was drawn (eagerly, on the CPU)
};

// A number the compiled function takes as an argument, read by `scalar_arg` statements.
struct ScalarArg {
  bool dynamic = false;        // passed as tg::dynamic(value) (a graph input), not a host value guarded by value
  bool integer = false;        // an int64 (else a double)
  std::vector<double> values;  // per call
};

// How the calls of a compiled program differ from one another (drawn from the seed's second random
// stream, so that the program itself stays what the seed drew before calls varied). Every call is
// compared with eager mode on the same arguments.
struct CallPlan {
  int calls = 3;
  // Inputs marked static (mark_static_address) and replaced every call by a new tensor of the same
  // shape at another address with new values, as a new loader or load_state_dict would: CUDA graphs
  // update their recordings (graph_updates) instead of recording again.
  std::vector<int> rebound;
  // Inputs the compiled function captures, as a model's parameters, instead of taking them as
  // arguments; every call after the first gives each new memory with new values (Tensor::set_, as a
  // model moved off the device and back, or loaded into new storage): lifted inputs of the graphs,
  // static for CUDA graphs, whose recordings are updated.
  std::vector<int> captured;
  // Some captured input is detached inside the function: that handle is guarded by its memory, and
  // new memory recompiles.
  bool captured_detached = false;
  // Input sizes per variant (variant 0: the inputs' own sizes) and the variant of each call: a
  // changed dim recompiles.
  std::vector<std::vector<Shape>> shapes;
  std::vector<int> variant;  // per call; empty: every call has variant 0
  std::vector<ScalarArg> scalars;
  // Shape buckets: input 0 holds rows[call] rows (dim 0, bucketed to `bucket_sizes`, padded with
  // pad_value); the body runs on each row and its outputs are stacked (narrowed back to the true
  // rows), plus a mean over the real rows through tg::bucket_mask and tg::bucket_extent.
  bool bucketed = false;
  std::vector<int64_t> bucket_sizes;
  std::vector<int64_t> rows;  // per call
  double pad_value = 0.0;
  // Whether calls differ in anything guarded (sizes, guarded scalars): otherwise nothing may recompile.
  bool guarded_changes() const;
};

// A whole program.
struct Program {
  uint64_t seed = 0;
  std::vector<InputSpec> inputs;
  std::vector<Statement> body;
  std::vector<int> outputs;  // value indices
  bool gradient_epilogues = false;  // compiled with CompileOptions::fuse_gradient_epilogues (odd seeds)
  std::optional<DType> autocast;    // the body runs under AutocastGuard(inputs' device, *autocast)
  CallPlan plan;                    // how its calls differ
};

// How closely compiled results must match eager ones: float32's bounds, looser where a 16-bit input
// lets a fused kernel round a step an ulp apart from the op's own kernel.
struct Tolerance {
  double rtol = 1e-4;
  double atol = 1e-5;
};
Tolerance tolerance_of(const Program& program);

// The program's inputs on `device`, drawn from the program's seed (the same values every time).
TensorList make_inputs(const Program& program, Device device);
// Runs the program on `inputs` (its inputs, then one 0-dim CPU tensor per dynamic scalar argument)
// as call `current_call()` sees it, and returns its outputs. A bucketed program runs the body on each
// row of input 0.
TensorList run_program(const Program& program, const TensorList& inputs);
// The arguments of call `call`: the program's inputs at that call's sizes (new values where sizes
// change or an input is rebound; otherwise make_inputs's), then the dynamic scalars' tensors.
TensorList make_call_inputs(const Program& program, int call, Device device);
// The call whose scalar arguments run_program reads (0 unless a CallScope says otherwise).
int current_call();
// Makes `call` the current call on this thread while alive.
class CallScope {
 public:
  explicit CallScope(int call);
  ~CallScope();
  CallScope(const CallScope&) = delete;
  CallScope& operator=(const CallScope&) = delete;

 private:
  int previous_;
};
// Makes `program` and its dynamic scalars' tensors (one per scalar argument, undefined for guarded
// ones) what scalar_arg statements read on this thread while alive (run_program holds one).
class RunningScope {
 public:
  RunningScope(const Program& program, TensorList dynamic);
  ~RunningScope();
  RunningScope(const RunningScope&) = delete;
  RunningScope& operator=(const RunningScope&) = delete;

 private:
  const Program* previous_program_;
  TensorList previous_dynamic_;
};
// The value of scalar argument k at the current call, for `scalar_arg` statements: a double for a
// guarded one, and for a dynamic one the tensor run_program received.
double guarded_scalar(int k);
Tensor dynamic_scalar(int k);
// The calls' differences in words (comment lines of the printed program; empty when none).
std::string print_calls(const Program& program);
// The parameters of the program's modules, in statement order (each module's in named_parameters order).
TensorList program_parameters(const Program& program);
// Moves the program's modules to `device` (they are drawn on the CPU).
void move_modules(const Program& program, Device device);
// The program as a self-contained gtest case comparing `backend` with eager mode.
std::string print_program(const Program& program, const std::string& backend, Device device);

}  // namespace tg::fuzz
