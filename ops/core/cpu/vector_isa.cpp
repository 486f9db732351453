#include "ops/core/cpu/vector_isa.h"

#include <algorithm>
#include <atomic>

namespace tg::cpu {
namespace {

std::atomic<VectorIsa> g_cap{VectorIsa::Avx512};

}  // namespace

VectorIsa cpu_vector_isa() {
  static const VectorIsa isa = [] {
#if TG_CPU_ISA_VARIANTS
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
        __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq"))
      return VectorIsa::Avx512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return VectorIsa::Avx2;
#endif
    return VectorIsa::Baseline;
  }();
  return isa;
}

VectorIsa vector_isa() { return std::min(cpu_vector_isa(), g_cap.load(std::memory_order_relaxed)); }

void set_max_vector_isa(VectorIsa cap) { g_cap.store(cap, std::memory_order_relaxed); }

}  // namespace tg::cpu
