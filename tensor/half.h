// The 16-bit floating element types: IEEE binary16 (`Half`, dtype float16) and bfloat16 (`BFloat16`).
// Each stores its bits and converts to and from float (rounding to nearest even), so arithmetic on
// them runs in float and rounds once when a result is stored, in host code and CUDA kernels alike.
#pragma once

#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "tensor/hd.h"

#if defined(__CUDACC__)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#endif

namespace tg {

namespace half_bits {

// The bits of a float and back, usable in kernels.
TG_HD uint32_t of_float(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
#endif
}
TG_HD float to_float(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
#endif
}

// float -> bfloat16 bits, rounding to nearest even; NaNs stay (quiet) NaNs.
TG_HD uint16_t bfloat16_from_float(float f) {
#if defined(__CUDA_ARCH__)
  return __bfloat16_as_ushort(__float2bfloat16_rn(f));
#else
  const uint32_t u = of_float(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
#endif
}

TG_HD float bfloat16_to_float(uint16_t b) { return to_float(static_cast<uint32_t>(b) << 16); }

// float -> binary16 bits, rounding to nearest even (subnormals included); beyond the range: inf.
TG_HD uint16_t half_from_float(float f) {
#if defined(__CUDA_ARCH__)
  return __half_as_ushort(__float2half_rn(f));
#else
  const uint32_t u = of_float(f);
  const uint32_t sign = (u >> 16) & 0x8000u;
  uint32_t a = u & 0x7fffffffu;
  if (a >= 0x7f800000u) return static_cast<uint16_t>(sign | (a > 0x7f800000u ? 0x7e00u : 0x7c00u));
  if (a >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds past 65504
  if (a >= 0x38800000u) {                                              // a normal binary16
    a += 0xfffu + ((a >> 13) & 1u);
    return static_cast<uint16_t>(sign | ((a - 0x38000000u) >> 13));
  }
  // A subnormal: adding 0.5 leaves the value's multiple of 2^-24 in the low bits, rounded by the FPU.
  const float shifted = to_float(a) + 0.5f;
  return static_cast<uint16_t>(sign | (of_float(shifted) - 0x3f000000u));
#endif
}

TG_HD float half_to_float(uint16_t h) {
#if defined(__CUDA_ARCH__)
  return __half2float(__ushort_as_half(h));
#else
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  const uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0x1f) return to_float(sign | 0x7f800000u | (mantissa << 13));
  if (exponent == 0) {
    const float v = static_cast<float>(mantissa) * 5.9604644775390625e-8f;  // mantissa * 2^-24
    return sign ? -v : v;
  }
  return to_float(sign | ((exponent + 112) << 23) | (mantissa << 13));
#endif
}

}  // namespace half_bits

// A 16-bit float stored as bits, with `Codec` converting to and from float.
template <typename Codec>
struct Float16Storage {
  uint16_t bits;

  Float16Storage() = default;  // uninitialized, like a float (trivial, so kernels may share arrays)
  TG_HD Float16Storage(float v) : bits(Codec::encode(v)) {}  // NOLINT: converts like a built-in float
  template <typename T, std::enable_if_t<std::is_arithmetic_v<T> && !std::is_same_v<T, float>, int> = 0>
  TG_HD Float16Storage(T v) : bits(Codec::encode(static_cast<float>(v))) {}  // NOLINT
  TG_HD operator float() const { return Codec::decode(bits); }                   // NOLINT
  // The value with these bits.
  static constexpr Float16Storage from_bits(uint16_t b) {
    Float16Storage v{};
    v.bits = b;
    return v;
  }

  TG_HD Float16Storage& operator+=(float v) { return *this = float(*this) + v; }
  TG_HD Float16Storage& operator-=(float v) { return *this = float(*this) - v; }
  TG_HD Float16Storage& operator*=(float v) { return *this = float(*this) * v; }
  TG_HD Float16Storage& operator/=(float v) { return *this = float(*this) / v; }
};

struct HalfCodec {
  static TG_HD uint16_t encode(float v) { return half_bits::half_from_float(v); }
  static TG_HD float decode(uint16_t b) { return half_bits::half_to_float(b); }
};
struct BFloat16Codec {
  static TG_HD uint16_t encode(float v) { return half_bits::bfloat16_from_float(v); }
  static TG_HD float decode(uint16_t b) { return half_bits::bfloat16_to_float(b); }
};

// IEEE binary16: 5 exponent bits, 10 mantissa bits (dtype float16).
using Half = Float16Storage<HalfCodec>;
// bfloat16: float32's 8 exponent bits, 7 mantissa bits (dtype bfloat16).
using BFloat16 = Float16Storage<BFloat16Codec>;

// True for the 16-bit float types.
template <typename T>
inline constexpr bool is_half_v = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

// True for every floating element type (float, double, Half, BFloat16).
template <typename T>
inline constexpr bool is_floating_v = std::is_floating_point_v<T> || is_half_v<T>;

// The type kernels compute and accumulate in: float for the 16-bit types, the type itself otherwise.
template <typename T>
using acc_type = std::conditional_t<is_half_v<T>, float, T>;

}  // namespace tg

namespace std {

// numeric_limits of the 16-bit floats, from their bit patterns.
template <typename Codec>
class numeric_limits<tg::Float16Storage<Codec>> {
  using T = tg::Float16Storage<Codec>;
  static constexpr bool kHalf = std::is_same_v<Codec, tg::HalfCodec>;

 public:
  static constexpr bool is_specialized = true;
  static constexpr bool is_signed = true;
  static constexpr bool is_integer = false;
  static constexpr bool is_exact = false;
  static constexpr bool has_infinity = true;
  static constexpr bool has_quiet_NaN = true;
  static constexpr int digits = kHalf ? 11 : 8;
  static constexpr T lowest() { return T::from_bits(kHalf ? 0xfbff : 0xff7f); }
  static constexpr T max() { return T::from_bits(kHalf ? 0x7bff : 0x7f7f); }
  static constexpr T min() { return T::from_bits(kHalf ? 0x0400 : 0x0080); }
  static constexpr T epsilon() { return T::from_bits(kHalf ? 0x1400 : 0x3c00); }
  static constexpr T infinity() { return T::from_bits(kHalf ? 0x7c00 : 0x7f80); }
  static constexpr T quiet_NaN() { return T::from_bits(kHalf ? 0x7e00 : 0x7fc0); }
};

}  // namespace std
