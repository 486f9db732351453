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

// A whole program.
struct Program {
  uint64_t seed = 0;
  std::vector<InputSpec> inputs;
  std::vector<Statement> body;
  std::vector<int> outputs;  // value indices
  bool gradient_epilogues = false;  // compiled with CompileOptions::fuse_gradient_epilogues (odd seeds)
  std::optional<DType> autocast;    // the body runs under AutocastGuard(inputs' device, *autocast)
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
// Runs the program's body on `inputs` and returns its outputs.
TensorList run_program(const Program& program, const TensorList& inputs);
// The parameters of the program's modules, in statement order (each module's in named_parameters order).
TensorList program_parameters(const Program& program);
// Moves the program's modules to `device` (they are drawn on the CPU).
void move_modules(const Program& program, Device device);
// The program as a self-contained gtest case comparing `backend` with eager mode.
std::string print_program(const Program& program, const std::string& backend, Device device);

}  // namespace tg::fuzz
