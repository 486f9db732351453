// The elementwise formulas, written once: every functor the CPU loops and the CUDA kernels run,
// and the math they call. The fused-kernel generator embeds this file's text in each kernel it
// emits (NVRTC), so fused and eager kernels run the same code. It therefore stays self-contained:
// no standard headers and no host-only traits when NVRTC compiles it (__CUDACC_RTC__), where the
// generated kernel computes 16-bit floats in float and so needs no Half type.
#pragma once

#if defined(__CUDACC_RTC__)
#ifndef TG_HD
#define TG_HD __device__ __forceinline__
#endif
namespace tg {
// Generated kernels hold 16-bit floats as float, so every compute type accumulates in itself.
template <typename T>
using acc_type = T;
}  // namespace tg
#else
#include <math.h>

#include "tensor/half.h"
#include "tensor/hd.h"
#endif

namespace tg::ew {

// ---- math with one spelling for float and double (host libm or CUDA's device math) ----------

TG_HD float m_exp(float x) { return ::expf(x); }
TG_HD double m_exp(double x) { return ::exp(x); }
TG_HD float m_log(float x) { return ::logf(x); }
TG_HD double m_log(double x) { return ::log(x); }
TG_HD float m_sin(float x) { return ::sinf(x); }
TG_HD double m_sin(double x) { return ::sin(x); }
TG_HD float m_cos(float x) { return ::cosf(x); }
TG_HD double m_cos(double x) { return ::cos(x); }
TG_HD float m_tanh(float x) { return ::tanhf(x); }
TG_HD double m_tanh(double x) { return ::tanh(x); }
TG_HD float m_erf(float x) { return ::erff(x); }
TG_HD double m_erf(double x) { return ::erf(x); }
TG_HD float m_sqrt(float x) { return ::sqrtf(x); }
TG_HD double m_sqrt(double x) { return ::sqrt(x); }
TG_HD float m_trunc(float x) { return ::truncf(x); }
TG_HD double m_trunc(double x) { return ::trunc(x); }
TG_HD float m_pow(float x, float y) { return ::powf(x, y); }
TG_HD double m_pow(double x, double y) { return ::pow(x, y); }
TG_HD float m_abs(float x) { return ::fabsf(x); }
TG_HD double m_abs(double x) { return ::fabs(x); }
TG_HD float m_log1p(float x) { return ::log1pf(x); }
TG_HD double m_log1p(double x) { return ::log1p(x); }

// Type tests without <type_traits> (NVRTC has no standard headers).
template <typename A, typename B>
inline constexpr bool kSame = false;
template <typename A>
inline constexpr bool kSame<A, A> = true;
template <typename T>
inline constexpr bool kIsBool = kSame<T, bool>;
#if defined(__CUDACC_RTC__)
template <typename T>
inline constexpr bool kIsFloat = kSame<T, float> || kSame<T, double>;
#else
template <typename T>
inline constexpr bool kIsFloat = is_floating_v<T>;  // Half and BFloat16 too
#endif

// Constants of the two GELU forms.
inline constexpr double kSqrt1_2 = 0.70710678118654752440;   // 1/sqrt(2)
inline constexpr double kInvSqrt2Pi = 0.39894228040143267794;  // 1/sqrt(2*pi)
inline constexpr double kSqrt2OverPi = 0.79788456080286535588;  // sqrt(2/pi)
inline constexpr double kGeluCoeff = 0.044715;

// ---- binary arithmetic --------------------------------------------------------------------

template <typename T>
struct AddFn {
  T alpha;
  TG_HD T operator()(T a, T b) const {
    if constexpr (kIsBool<T>) return a || (alpha && b);
    else return a + alpha * b;
  }
};
template <typename T>
struct SubFn {
  T alpha;
  TG_HD T operator()(T a, T b) const { return a - alpha * b; }
};
template <typename T>
struct MulFn {
  TG_HD T operator()(T a, T b) const {
    if constexpr (kIsBool<T>) return a && b;
    else return a * b;
  }
};
template <typename T>
struct DivFn {
  TG_HD T operator()(T a, T b) const { return a / b; }
};
// NaN-propagating, like torch.maximum.
template <typename T>
struct MaximumFn {
  TG_HD T operator()(T a, T b) const {
    if constexpr (kIsFloat<T>) {
      if (a != a) return a;
    }
    return a > b ? a : b;
  }
};
template <typename T>
struct MinimumFn {
  TG_HD T operator()(T a, T b) const {
    if constexpr (kIsFloat<T>) {
      if (a != a) return a;
    }
    return a < b ? a : b;
  }
};

// pow with a tensor exponent. Integers: a negative exponent gives 0 except for bases 1 and -1, as
// in PyTorch (only scalar exponents are checked for sign).
template <typename T>
struct PowTensorFn {
  using C = acc_type<T>;
  TG_HD T operator()(T a, T b) const {
    if constexpr (kIsFloat<T>) {
      return m_pow(C(a), C(b));
    } else {
      if (b < T(0)) {
        if (a == T(1)) return T(1);
        if (a == T(-1)) return (-b) % T(2) ? T(-1) : T(1);
        return T(0);
      }
      T result = 1, base = a;
      for (T n = b; n > 0; n >>= 1) {
        if (n & 1) result *= base;
        base *= base;
      }
      return result;
    }
  }
};

// ---- fused gradients (g is the incoming gradient) -----------------------------------------

template <typename T>
struct TanhBackwardFn {
  using C = acc_type<T>;
  TG_HD T operator()(T g, T y) const { return C(g) * (C(1) - C(y) * C(y)); }
};
template <typename T>
struct SigmoidBackwardFn {
  using C = acc_type<T>;
  TG_HD T operator()(T g, T y) const { return C(g) * (C(1) - C(y)) * C(y); }
};
// Selects rather than multiplies, so an infinite g where y <= 0 gives 0, as in PyTorch.
template <typename T>
struct ThresholdBackwardFn {
  TG_HD T operator()(T g, T y) const { return y > T(0) ? g : T(0); }
};
template <typename T>
struct GeluBackwardFn {
  using C = acc_type<T>;
  TG_HD T operator()(T g_in, T x_in) const {
    const C g = g_in, x = x_in;
    const C cdf = C(0.5) * (C(1) + m_erf(x * C(kSqrt1_2)));
    const C pdf = m_exp(C(-0.5) * x * x) * C(kInvSqrt2Pi);
    return g * (cdf + x * pdf);
  }
};
template <typename T>
struct GeluTanhBackwardFn {
  using C = acc_type<T>;
  TG_HD T operator()(T g_in, T x_in) const {
    const C g = g_in, x = x_in;
    const C x2 = x * x;
    const C t = m_tanh(C(kSqrt2OverPi) * (x + C(kGeluCoeff) * x2 * x));
    const C dinner = C(kSqrt2OverPi) * (C(1) + C(3 * kGeluCoeff) * x2);
    return g * (C(0.5) * (C(1) + t) + C(0.5) * x * (C(1) - t * t) * dinner);
  }
};

// g * s * (1 + x * (1 - s)) with s = sigmoid(x), as PyTorch's silu_backward.
template <typename T>
struct SiluBackwardFn {
  using C = acc_type<T>;
  TG_HD T operator()(T g_in, T x_in) const {
    const C g = g_in, x = x_in;
    const C s = C(1) / (C(1) + m_exp(-x));
    return g * s * (C(1) + x * (C(1) - s));
  }
};

// ---- unary --------------------------------------------------------------------------------

template <typename T>
struct NegFn {
  TG_HD T operator()(T a) const { return -a; }
};
template <typename T>
struct SquareFn {
  TG_HD T operator()(T a) const { return a * a; }
};
template <typename T>
struct AbsFn {
  TG_HD T operator()(T a) const {
    if constexpr (kIsFloat<T>) return m_abs(a);
    else return a < T(0) ? T(-a) : a;
  }
};
template <typename T>
struct SgnFn {
  TG_HD T operator()(T a) const {
    if constexpr (kIsBool<T>) return a;
    else return static_cast<T>(static_cast<int>(T(0) < a) - static_cast<int>(a < T(0)));
  }
};
template <typename T>
struct ExpFn {
  TG_HD T operator()(T a) const { return m_exp(a); }
};
template <typename T>
struct LogFn {
  TG_HD T operator()(T a) const { return m_log(a); }
};
template <typename T>
struct SinFn {
  TG_HD T operator()(T a) const { return m_sin(a); }
};
template <typename T>
struct CosFn {
  TG_HD T operator()(T a) const { return m_cos(a); }
};
template <typename T>
struct ErfFn {
  TG_HD T operator()(T a) const { return m_erf(a); }
};
template <typename T>
struct TanhFn {
  TG_HD T operator()(T a) const { return m_tanh(a); }
};
template <typename T>
struct SigmoidFn {
  using C = acc_type<T>;
  TG_HD T operator()(T a) const { return C(1) / (C(1) + m_exp(-C(a))); }
};
// NaN stays NaN (like clamp_min(0)).
template <typename T>
struct ReluFn {
  TG_HD T operator()(T a) const { return a < T(0) ? T(0) : a; }
};
template <typename T>
struct GeluFn {
  using C = acc_type<T>;
  TG_HD T operator()(T x_in) const {
    const C x = x_in;
    return C(0.5) * x * (C(1) + m_erf(x * C(kSqrt1_2)));
  }
};
template <typename T>
struct GeluTanhFn {
  using C = acc_type<T>;
  TG_HD T operator()(T x_in) const {
    const C x = x_in;
    return C(0.5) * x * (C(1) + m_tanh(C(kSqrt2OverPi) * (x + C(kGeluCoeff) * x * x * x)));
  }
};
// x * sigmoid(x), written as x / (1 + exp(-x)) as PyTorch computes it.
template <typename T>
struct SiluFn {
  using C = acc_type<T>;
  TG_HD T operator()(T a) const {
    const C x = a;
    return x / (C(1) + m_exp(-x));
  }
};
// log(1 + exp(beta x)) / beta, and x itself where beta x > threshold (where the two agree to
// rounding), as PyTorch's softplus.
template <typename T>
struct SoftplusFn {
  using C = acc_type<T>;
  C beta, threshold;
  TG_HD T operator()(T a) const {
    const C x = a;
    return x * beta > threshold ? x : m_log1p(m_exp(x * beta)) / beta;
  }
};
template <typename T>
struct SqrtFn {
  TG_HD T operator()(T a) const { return m_sqrt(a); }
};
template <typename T>
struct RsqrtFn {
  using C = acc_type<T>;
  TG_HD T operator()(T a) const { return C(1) / m_sqrt(C(a)); }
};
template <typename T>
struct TruncFn {
  TG_HD T operator()(T a) const {
    if constexpr (kIsFloat<T>) return m_trunc(a);
    else return a;
  }
};
// Integer exponents must be >= 0 (checked in infer), as PyTorch requires.
template <typename T>
struct PowFn {
  T e;
  TG_HD T operator()(T a) const {
    if constexpr (kIsFloat<T>) {
      if (e == T(2)) return a * a;
      if (e == T(3)) return a * a * a;
      if (e == T(0.5)) return m_sqrt(a);
      if (e == T(-1)) return T(1) / a;
      return m_pow(a, e);
    } else {
      T result = 1, base = a;
      for (T n = e; n > 0; n >>= 1) {
        if (n & 1) result *= base;
        base *= base;
      }
      return result;
    }
  }
};
// NaN inputs stay NaN; with min > max every value becomes max, as in PyTorch.
template <typename T>
struct ClampFn {
  T lo, hi;
  bool has_lo, has_hi;
  TG_HD T operator()(T a) const {
    if constexpr (kIsFloat<T>) {
      if (a != a) return a;
    }
    if (has_lo && a < lo) a = lo;
    if (has_hi && a > hi) a = hi;
    return a;
  }
};

// ---- comparisons, selection, copies -------------------------------------------------------

template <typename T>
struct EqFn {
  TG_HD bool operator()(T a, T b) const { return a == b; }
};
template <typename T>
struct NeFn {
  TG_HD bool operator()(T a, T b) const { return a != b; }
};
template <typename T>
struct LtFn {
  TG_HD bool operator()(T a, T b) const { return a < b; }
};
template <typename T>
struct LeFn {
  TG_HD bool operator()(T a, T b) const { return a <= b; }
};
template <typename T>
struct GtFn {
  TG_HD bool operator()(T a, T b) const { return a > b; }
};
template <typename T>
struct GeFn {
  TG_HD bool operator()(T a, T b) const { return a >= b; }
};
template <typename T>
struct WhereFn {
  TG_HD T operator()(bool c, T a, T b) const { return c ? a : b; }
};
// Element conversion of copy_/to(dtype) (float to bool is x != 0, float to int truncates).
template <typename To, typename From>
struct ConvertFn {
  TG_HD To operator()(From x) const { return static_cast<To>(x); }
};
template <typename T>
struct FillFn {
  T v;
  TG_HD T operator()() const { return v; }
};

}  // namespace tg::ew
