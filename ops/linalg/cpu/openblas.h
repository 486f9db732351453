// OpenBLAS, opened at the first CPU matrix product with its kernels chosen for the running CPU.
//
// OpenBLAS picks its kernels from the CPU model when it loads; on virtual machines that hide the
// model it can fall back to SSE3 kernels on an AVX-512 CPU (four times slower). So the library is
// not linked but opened with dlopen at first use, after OPENBLAS_CORETYPE is set from the CPU's own
// feature flags (SkylakeX with AVX-512, Haswell with AVX2 and FMA, Sandybridge with AVX). A value
// the user set is kept.
#pragma once

#ifdef TG_WITH_CBLAS
#include <cblas.h>
#endif

#include <string>

namespace tg::cpu {

#ifdef TG_WITH_CBLAS
// The entry points tapegraph calls.
struct OpenBlas {
  void (*sgemm)(CBLAS_ORDER, CBLAS_TRANSPOSE, CBLAS_TRANSPOSE, blasint, blasint, blasint, float, const float*, blasint,
                const float*, blasint, float, float*, blasint) = nullptr;
  void (*dgemm)(CBLAS_ORDER, CBLAS_TRANSPOSE, CBLAS_TRANSPOSE, blasint, blasint, blasint, double, const double*,
                blasint, const double*, blasint, double, double*, blasint) = nullptr;
  void (*set_num_threads)(int) = nullptr;
  char* (*get_corename)() = nullptr;
  char* (*get_config)() = nullptr;  // build options, "DYNAMIC_ARCH" among them when it holds every kernel set
};

// The opened library, or nullptr when it cannot be opened (products then run on Eigen).
const OpenBlas* openblas();
#endif

// The OpenBLAS kernel set in use ("SkylakeX", "Haswell", ...), or "" without OpenBLAS.
std::string openblas_core();
// Whether the opened OpenBLAS holds every kernel set and chooses among them as it loads.
bool openblas_chooses_kernels();

// The OPENBLAS_CORETYPE matching the running CPU's features, or "" where OpenBLAS's own choice stands.
std::string openblas_core_for_this_cpu();

}  // namespace tg::cpu
