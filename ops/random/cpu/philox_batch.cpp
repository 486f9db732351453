#include "ops/random/cpu/philox_batch.h"

#include "ops/core/cpu/vector_isa.h"

namespace tg::cpu {
namespace {

// philox4x32_10 on every lane at once: the counter of lane b is first + b (low word first, upper
// half zero), the key is the seed's two words.
TG_CPU_ALWAYS_INLINE inline void philox_lanes(uint64_t seed, uint64_t first, PhiloxBatch& out) {
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;  // key bumps, as in philox4x32_10
  constexpr uint64_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;  // round multipliers
  constexpr int K = kPhiloxBatch;
  uint32_t c0[K], c1[K], c2[K], c3[K];
  for (int b = 0; b < K; ++b) {
    const uint64_t index = first + static_cast<uint64_t>(b);
    c0[b] = static_cast<uint32_t>(index);
    c1[b] = static_cast<uint32_t>(index >> 32);
    c2[b] = 0;
    c3[b] = 0;
  }
  uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      k0 += kW0;
      k1 += kW1;
    }
    for (int b = 0; b < K; ++b) {
      const uint64_t p0 = kM0 * c0[b];
      const uint64_t p1 = kM1 * c2[b];
      const uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ c1[b] ^ k0;
      const uint32_t n2 = static_cast<uint32_t>(p0 >> 32) ^ c3[b] ^ k1;
      c1[b] = static_cast<uint32_t>(p1);
      c3[b] = static_cast<uint32_t>(p0);
      c0[b] = n0;
      c2[b] = n2;
    }
  }
  for (int b = 0; b < K; ++b) {
    out.w[0][b] = c0[b];
    out.w[1][b] = c1[b];
    out.w[2][b] = c2[b];
    out.w[3][b] = c3[b];
  }
}

#if TG_CPU_ISA_VARIANTS
__attribute__((target("avx2,fma"))) void philox_lanes_avx2(uint64_t seed, uint64_t first, PhiloxBatch& out) {
  philox_lanes(seed, first, out);
}
__attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,avx2,fma"))) void philox_lanes_avx512(
    uint64_t seed, uint64_t first, PhiloxBatch& out) {
  philox_lanes(seed, first, out);
}
#endif

}  // namespace

void philox_batch(uint64_t seed, uint64_t first, PhiloxBatch& out) {
#if TG_CPU_ISA_VARIANTS
  switch (vector_isa()) {
    case VectorIsa::Avx512: return philox_lanes_avx512(seed, first, out);
    case VectorIsa::Avx2: return philox_lanes_avx2(seed, first, out);
    case VectorIsa::Baseline: break;
  }
#endif
  philox_lanes(seed, first, out);
}

}  // namespace tg::cpu
