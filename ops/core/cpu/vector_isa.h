// Which vector instructions the running CPU offers, for loops compiled in several variants (the
// build targets baseline x86-64, so a shipped binary runs anywhere and still uses AVX2/AVX-512).
#pragma once

// The AVX2 and AVX-512 variants exist on x86-64 with GCC or Clang, unless the build turns them off
// (-DTG_CPU_ISA_VARIANTS=OFF in CMake: the sanitizer builds, which check the same source once).
#ifndef TG_CPU_ISA_VARIANTS
#if defined(__x86_64__) && defined(__GNUC__)
#define TG_CPU_ISA_VARIANTS 1
#else
#define TG_CPU_ISA_VARIANTS 0
#endif
#endif
#if TG_CPU_ISA_VARIANTS
#define TG_CPU_ALWAYS_INLINE __attribute__((always_inline))
#else
#define TG_CPU_ALWAYS_INLINE
#endif

namespace tg::cpu {

// The widest vector instruction set the loops have a variant for.
enum class VectorIsa { Baseline, Avx2, Avx512 };

// The running CPU's widest, read once.
VectorIsa cpu_vector_isa();
// The variant the loops run: cpu_vector_isa() capped by set_max_vector_isa.
VectorIsa vector_isa();
// Caps the variants the loops may run (Avx512 by default: no cap). Every variant rounds alike (the
// library is built without contracted multiply-adds); tests compare them, and a user may pin a run
// to the baseline code, as oneDNN's ONEDNN_MAX_CPU_ISA does for its kernels.
void set_max_vector_isa(VectorIsa cap);

}  // namespace tg::cpu
