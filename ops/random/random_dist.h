// Distributions over Philox blocks, shared by the CPU loop and the CUDA kernels so that element i of
// a random tensor is the same value on every device.
//
// Mapping (documented contract): a random op with state (seed, offset) computes element block b from
// the Philox4x32-10 output at counter offset + b under key seed, i.e. the first curand4() after
// curand_init(seed, 0, 4 * (offset + b)). A block is four 32-bit words and yields kPerBlock elements
// (4 for float32 uniform/normal, 2 for float64 uniform/normal and for randint); element i lies in
// block i / kPerBlock. An op of n elements therefore reserves ceil(n / kPerBlock) blocks.
#pragma once

#include <math.h>

#include <cstdint>
#include <type_traits>

#include "tensor/hd.h"

namespace tg {

// Uniform float on [0, 1): the top 24 bits scaled by 2^-24 (exact, never 1.0f).
TG_HD float uniform_float(uint32_t x) { return static_cast<float>(x >> 8) * 0x1p-24f; }

// Uniform double on [0, 1): the top 53 of 64 bits scaled by 2^-53 (exact, never 1.0).
TG_HD double uniform_double(uint32_t hi, uint32_t lo) {
  const uint64_t bits = (static_cast<uint64_t>(hi) << 32) | lo;
  return static_cast<double>(bits >> 11) * 0x1p-53;
}

// a * b + c rounded twice, as curand's host code computes it; the device must not fuse it into an FMA.
TG_HD float mul_add_unfused(float a, float b, float c) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(__fmul_rn(a, b), c);
#else
  return a * b + c;
#endif
}
TG_HD double mul_add_unfused(double a, double b, double c) {
#if defined(__CUDA_ARCH__)
  return __dadd_rn(__dmul_rn(a, b), c);
#else
  return a * b + c;
#endif
}

// curand's float Box-Muller (_curand_box_muller, host branch): u in (0, 1] so log(u) is finite.
TG_HD void box_muller_float(uint32_t x, uint32_t y, float& a, float& b) {
  constexpr float kInv32 = 2.3283064e-10f;               // CURAND_2POW32_INV
  constexpr float kInv32TwoPi = 2.3283064e-10f * 6.2831855f;  // CURAND_2POW32_INV_2PI
  const float u = mul_add_unfused(static_cast<float>(x), kInv32, kInv32 / 2);
  const float v = mul_add_unfused(static_cast<float>(y), kInv32TwoPi, kInv32TwoPi / 2);
  const float s = ::sqrtf(-2.0f * ::logf(u));
  a = ::sinf(v) * s;
  b = ::cosf(v) * s;
}

// curand's double Box-Muller (_curand_box_muller_double, host branch): 53-bit u and angle from four words.
TG_HD void box_muller_double(uint32_t x0, uint32_t x1, uint32_t y0, uint32_t y1, double& a, double& b) {
  constexpr double kInv53 = 1.1102230246251565e-16;  // CURAND_2POW53_INV_DOUBLE
  constexpr double kPi = 3.1415926535897932;
  const uint64_t zx = static_cast<uint64_t>(x0) ^ (static_cast<uint64_t>(x1) << (53 - 32));
  const uint64_t zy = static_cast<uint64_t>(y0) ^ (static_cast<uint64_t>(y1) << (53 - 32));
  const double u = mul_add_unfused(static_cast<double>(zx), kInv53, kInv53 / 2.0);
  const double v = mul_add_unfused(static_cast<double>(zy), kInv53 * 2.0, kInv53);
  const double s = ::sqrt(-2.0 * ::log(u));
  a = ::sin(v * kPi) * s;
  b = ::cos(v * kPi) * s;
}

// High 64 bits of a 64x64-bit product.
TG_HD uint64_t mul_hi_u64(uint64_t a, uint64_t b) {
#if defined(__CUDA_ARCH__)
  return __umul64hi(a, b);
#else
  return static_cast<uint64_t>((static_cast<unsigned __int128>(a) * b) >> 64);
#endif
}

// An integer on [0, range) from 64 random bits by multiply-shift (Lemire): each result is hit
// floor or ceil of 2^64 / range times, so the bias is below range / 2^64 (< 2^-32 for ranges < 2^32).
TG_HD uint64_t bounded_u64(uint32_t hi, uint32_t lo, uint64_t range) {
  return mul_hi_u64((static_cast<uint64_t>(hi) << 32) | lo, range);
}

// Uniform [0, 1) elements: four per block for float, two for double.
template <typename T>
struct UniformBlock {
  static constexpr int kPerBlock = std::is_same_v<T, double> ? 2 : 4;
  TG_HD void operator()(const uint32_t (&w)[4], T (&v)[4]) const {
    if constexpr (std::is_same_v<T, double>) {
      v[0] = uniform_double(w[0], w[1]);
      v[1] = uniform_double(w[2], w[3]);
    } else {
      for (int i = 0; i < 4; ++i) v[i] = uniform_float(w[i]);
    }
  }
};

// Standard normal elements by Box-Muller: four per block for float, two for double.
template <typename T>
struct NormalBlock {
  static constexpr int kPerBlock = std::is_same_v<T, double> ? 2 : 4;
  TG_HD void operator()(const uint32_t (&w)[4], T (&v)[4]) const {
    if constexpr (std::is_same_v<T, double>) {
      box_muller_double(w[0], w[1], w[2], w[3], v[0], v[1]);
    } else if constexpr (std::is_same_v<T, float>) {
      box_muller_float(w[0], w[1], v[0], v[1]);
      box_muller_float(w[2], w[3], v[2], v[3]);
    } else {  // 16-bit floats: drawn in float, then rounded
      float f[4];
      NormalBlock<float>{}(w, f);
      for (int i = 0; i < 4; ++i) v[i] = f[i];
    }
  }
};

// Integers on [low, low + range): two per block, each from 64 bits.
template <typename T>
struct RandintBlock {
  static constexpr int kPerBlock = 2;
  int64_t low;
  uint64_t range;
  TG_HD void operator()(const uint32_t (&w)[4], T (&v)[4]) const {
    // Unsigned addition wraps instead of overflowing when low + offset crosses zero.
    v[0] = static_cast<T>(static_cast<int64_t>(static_cast<uint64_t>(low) + bounded_u64(w[0], w[1], range)));
    v[1] = static_cast<T>(static_cast<int64_t>(static_cast<uint64_t>(low) + bounded_u64(w[2], w[3], range)));
  }
};

}  // namespace tg
