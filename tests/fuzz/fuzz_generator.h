// Draws fuzz programs from a seed and checks one compiled against eager mode.
#pragma once

#include <cstdint>
#include <string>

#include "fuzz/fuzz_program.h"

namespace tg::fuzz {

// A random valid program: small inputs (some requiring grad, some non-contiguous, float32 and
// float64), 3 to 10 op applications that ran without error eagerly when drawn, 1 to 3 outputs.
Program generate_program(uint64_t seed);

// How one program fared.
enum class Verdict { Match, Mismatch, EagerRaised };

// The verdict and, for a mismatch, the difference and a C++ reproducer.
struct FuzzResult {
  Verdict verdict = Verdict::Match;
  std::string report;
};

// Runs the program eagerly and compiled with `backend` on `device`, three calls (warm-up,
// recording and replay for cudagraphs), comparing outputs, aliasing, input mutations and gradients.
FuzzResult check_program(const Program& program, const std::string& backend, Device device);

}  // namespace tg::fuzz
