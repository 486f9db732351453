// Calls that differ: the second random stream of the compiled-vs-eager fuzzer draws, after the
// program a seed drew, extension statements and how the program's calls differ (CallPlan), and
// compare_calls runs them compiled and eagerly.
#pragma once

#include <optional>
#include <string>

#include "fuzz/fuzz_program.h"
#include "graphs/counters.h"

namespace tg::fuzz {

// Appends extension statements (new ops, statements reading scalar arguments) to `program` and draws
// its CallPlan, from the seed's second stream. `values` are the program's values on the CPU
// (inputs, then statements' results), which grow with the statements drawn.
void draw_calls(Program& program, TensorList& values);

// How compare_calls found the calls.
struct CallsReport {
  std::optional<std::string> eager_error;  // eager mode raised this at some call (nothing compared then)
  std::optional<std::string> difference;   // the first difference, in words
  graphs::CompileCounters counters;        // of the compiled function after the last call
};

// Runs the program's calls (CallPlan) eagerly and compiled with `backend` on `device`, each call on
// fresh copies of make_call_inputs's arguments, comparing outputs, aliasing, input mutations and
// gradients as testing::compare_compiled_with_eager does; rebound inputs are marked static and kept
// alive, so that every call finds them at a new address. A program whose calls differ in nothing
// guarded must not recompile; a bucketed one compiles at most one variant per bucket.
CallsReport compare_calls(const Program& program, const std::string& backend, Device device);

}  // namespace tg::fuzz
