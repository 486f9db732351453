// TG_STRICT_CAPTURE=1 (any value but empty or 0) turns on CompileOptions::strict_capture in every
// cudagraphs compilation of the benchmarks: work outside CUDA graphs (an eager island, an eager
// fallback, a re-record) then raises, naming the op, instead of being timed.
#pragma once

#include <cstdlib>
#include <string>

#include "graphs/compile.h"

namespace bench {

// True when TG_STRICT_CAPTURE asks for strict capture.
inline bool strict_capture_from_env() {
  const char* v = std::getenv("TG_STRICT_CAPTURE");
  return v != nullptr && *v != '\0' && std::string(v) != "0";
}

// `o`, with strict capture when it compiles for CUDA graphs and TG_STRICT_CAPTURE asks for it.
inline tg::CompileOptions capture_mode(tg::CompileOptions o) {
  if (o.backend == "cudagraphs" && strict_capture_from_env()) o.strict_capture = true;
  return o;
}

}  // namespace bench
