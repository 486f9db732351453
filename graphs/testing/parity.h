// Checks that a compiled function matches eager mode exactly: for users' gtest suites and for the
// differential fuzzer.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "graphs/compile.h"

namespace tg::testing {

// Tolerances and compile options for the parity checks.
struct ParityOptions {
  CompileOptions compile;
  double rtol = 1e-5;
  double atol = 1e-6;
  int calls = 2;  // calls of the compiled function (the first traces, later ones hit the cache)
  std::optional<uint64_t> seed;  // reseeds the generator before each eager and compiled call (random ops)
};

// How a compiled run compared with eager mode.
struct ParityReport {
  std::optional<std::string> eager_error;  // eager mode raised this (nothing is compared then)
  std::optional<std::string> difference;   // the first difference found, in words
};

// Copies of `inputs` with the same strides and requires_grad; an input given twice is copied once
// and given twice.
TensorList copy_inputs(const TensorList& inputs);
// The first way `actual` (compiled) differs from `expected` (eager), in words, naming `what`:
// definedness, sizes, dtype, device, or an element outside atol + rtol * |expected| (NaNs and equal
// infinities match).
std::optional<std::string> value_difference(const Tensor& actual, const Tensor& expected, double rtol, double atol,
                                            const std::string& what);
// -1 when `t` shares no storage with any of `others`, else the index of the first it shares with.
int aliases(const Tensor& t, const TensorList& others);
// The first way one compiled call differs from the eager one, prefixed by `at`: the number of
// outputs, their requires_grad, values, and aliasing of inputs and earlier outputs, then the
// inputs' contents afterwards (`compiled_in` and `eager_in` are each mode's copies of the inputs).
std::optional<std::string> call_difference(const TensorList& actual, const TensorList& expected,
                                           const TensorList& compiled_in, const TensorList& eager_in, double rtol,
                                           double atol, const std::string& at);
// The first input whose gradient differs between the modes (inputs that require grad in eager mode).
std::optional<std::string> grads_difference(const TensorList& compiled_in, const TensorList& eager_in, double rtol,
                                            double atol, const std::string& at);

// Runs backward from the outputs that require grad, each weighted by a fresh uniform draw of its
// shape, and returns the weights so that the other mode's backward can use the same.
TensorList backward_with_random_weights(const TensorList& outputs);
// Runs backward from the outputs that require grad with `weights` (backward_with_random_weights's).
void backward_with_weights(const TensorList& outputs, const TensorList& weights);

// Runs fn eagerly and compiled on separate copies of `inputs` (strides, requires_grad and
// argument aliasing preserved), `options.calls` times, and compares: output values, dtypes and
// shapes; which outputs alias inputs or each other; the inputs' contents afterwards (mutations);
// and, when outputs require grad, the gradients of every input that requires grad. A compiled
// call that raises where eager does not is a difference.
ParityReport compare_compiled_with_eager(const graphs::GraphFn& fn, const TensorList& inputs,
                                         const ParityOptions& options = {});

// compare_compiled_with_eager as a gtest assertion: records a failure for a difference or for
// eager mode raising.
void expect_compiled_matches_eager(const graphs::GraphFn& fn, const TensorList& inputs,
                                   const ParityOptions& options = {});

}  // namespace tg::testing
