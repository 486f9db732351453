// A gtest helper for users: check that a compiled function matches eager mode exactly.
#pragma once

#include "graphs/compile.h"

namespace tg::testing {

// Tolerances and compile options for expect_compiled_matches_eager.
struct ParityOptions {
  CompileOptions compile;
  double rtol = 1e-5;
  double atol = 1e-6;
  int calls = 2;  // calls of the compiled function (the first traces, later ones hit the cache)
};

// Runs fn eagerly and compiled on separate copies of `inputs` (strides, requires_grad and
// argument aliasing preserved) and records gtest failures for any difference in: output values,
// dtypes and shapes; which outputs alias inputs or each other; the inputs' contents afterwards
// (mutations); and, when outputs require grad, the gradients of every input that requires grad.
void expect_compiled_matches_eager(const graphs::GraphFn& fn, const TensorList& inputs,
                                   const ParityOptions& options = {});

}  // namespace tg::testing
