// The text of ops/elementwise/elementwise_math.h, compiled in at build time (cmake/embed_text.cmake): the
// fused-kernel generator places it in every kernel it emits, so NVRTC compiles the same formulas
// the eager kernels run.
#pragma once

namespace tg {

// The whole header, as written.
extern const char* const kElementwiseMathSource;

}  // namespace tg
