// Draws fuzz programs from a seed and checks one compiled against eager mode.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "fuzz/fuzz_ops.h"
#include "fuzz/fuzz_program.h"

namespace tg::fuzz {

// The input sizes a program is drawn with. Small tensors reach ops' edge cases cheaply; kernels
// with a path of their own for large shapes, and Shape beyond its in-place dims, need the others.
enum class SizeMode {
  Small,  // 1 to 3 dims of 1 to 4
  Wide,   // 1 or 2 dims, mostly of 32 to 72
  Deep,   // 6 to 8 dims of 1 or 2
};
// The seed's size mode: Wide for one program in 8, Deep for another, Small for the rest.
SizeMode size_mode_of(uint64_t seed);

// A random valid program: inputs of the seed's size mode (some requiring grad, some non-contiguous;
// float32, float64, bfloat16 and float16), 3 to 10 op applications that ran without error eagerly
// when drawn, 1 to 3 outputs.
Program generate_program(uint64_t seed);

// How the PyTorch oracle's programs are drawn (tests/fuzz/oracle_main.cpp).
struct OracleOptions {
  std::optional<DType> autocast;  // every program under AutocastGuard(device, *autocast)
  // Recorded for the runner: programs PyTorch refuses but tapegraph runs (PYTORCH_ONLY_ERRORS in
  // torch_oracle.py) fail instead of being skipped.
  bool known_broken = false;
};
// A program for the PyTorch oracle: as generate_program, but only from ops with a PyTorch
// counterpart (modules among them; no random ops), a third of them with every input of one 16-bit
// dtype.
Program generate_oracle_program(uint64_t seed, const OracleOptions& options);

// How one program fared.
enum class Verdict {
  Match,
  Mismatch,
  EagerRaised,
  EagerUnstable,  // differed, but eager itself strays from a float64 run by more than the tolerance
};

// The verdict and, for a mismatch, the difference and a C++ reproducer.
struct FuzzResult {
  Verdict verdict = Verdict::Match;
  std::string report;
};

// Applies statement `s` (its op, operands and attributes drawn) to `operands`, their values, and
// appends it to `p` and its result to `values`, counting a module's parameters into `params`.
// False, with nothing appended, when the op raises on these operands.
bool append_statement(Program& p, TensorList& values, Statement s, const TensorList& operands, int& params);

// Runs the program eagerly and compiled with `backend` on `device`, its plan's calls (at least
// three: warm-up, recording and replay for cudagraphs; calls may differ in input tensors, sizes and
// scalar arguments, see CallPlan), comparing outputs, aliasing, input mutations and gradients.
// A difference counts as a mismatch only where the program is well conditioned at its precision:
// when eager mode's own outputs and gradients stay within the tolerance of the same program run on
// float64 copies of the inputs (a layer_norm over two nearly equal values, say, turns last-bit
// differences of its input into large ones, and no reordering of the arithmetic can be judged there).
FuzzResult check_program(const Program& program, const std::string& backend, Device device);

// Counters of the compiled functions check_program ran, summed (for the fuzzer's summary line).
struct FuzzStats {
  int64_t recompiles = 0;
  int64_t graph_updates = 0;
  int64_t rerecords = 0;
  int64_t bucketed_calls = 0;
};
FuzzStats& fuzz_stats();

}  // namespace tg::fuzz
