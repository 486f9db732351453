#include "ops/elementwise/cpu/span_math.h"

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <limits>

namespace tg::cpu {
namespace {

constexpr int64_t kChunk = 2048;  // elements per pass, held on the stack
constexpr int64_t kPad = 16;      // every pass covers whole vectors of the widest packet
using Chunk = Eigen::Array<float, Eigen::Dynamic, 1, Eigen::ColMajor, kChunk, 1>;
using ConstSpan = Eigen::Map<const Eigen::ArrayXf>;

constexpr float kRoot2OverPi = static_cast<float>(ew::kSqrt2OverPi);
constexpr float kCubic = static_cast<float>(ew::kGeluCoeff);
constexpr float kCubicSlope = static_cast<float>(3 * ew::kGeluCoeff);

// Runs eval(inputs..., out) over n elements in chunks: each chunk's inputs are copied into aligned
// buffers padded with zeros to whole vectors, so every element goes through the same vector code
// whatever its position (no scalar tail that would round differently), then the results are copied
// out. Inputs may alias the output.
template <int kInputs, typename Eval>
void by_chunks(const float* const (&in)[kInputs], float* out, int64_t n, Eval&& eval) {
  Chunk args[kInputs], result;
  for (int64_t at = 0; at < n; at += kChunk) {
    const int64_t m = std::min(kChunk, n - at), padded = (m + kPad - 1) / kPad * kPad;
    for (int k = 0; k < kInputs; ++k) {
      args[k].resize(padded);
      args[k].head(m) = ConstSpan(in[k] + at, m);
      args[k].tail(padded - m).setZero();
    }
    result.resize(padded);
    if constexpr (kInputs == 1) eval(args[0], result);
    else eval(args[0], args[1], result);
    std::copy(result.data(), result.data() + m, out + at);
  }
}

// tanh(u) on Eigen's vectorized rational approximation: within 4 ulps of tanh, NaN stays NaN, -0
// stays -0, and it saturates to +-1 (from |u| of about 8, where libm's tanhf still gives 1 - 1 ulp:
// GELU's far negative tail, 0.5 x (1 + tanh(u)), then reads 0 where libm gives some 1e-7 |x|).
void tanh_into(const Chunk& u, Chunk& t) { t = u.tanh(); }

// The largest of x[0..n), NaN when any is NaN (maxCoeff alone would skip it).
template <typename T>
T max_of(const T* x, int64_t n) {
  const Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>> v(x, n);
  return v.isNaN().any() ? std::numeric_limits<T>::quiet_NaN() : v.maxCoeff();
}

}  // namespace

void tanh_span(const float* x, float* y, int64_t n) {
  by_chunks<1>({x}, y, n, [](const Chunk& v, Chunk& out) { tanh_into(v, out); });
}

void gelu_tanh_span(const float* x, float* y, int64_t n) {
  by_chunks<1>({x}, y, n, [](const Chunk& v, Chunk& out) {
    Chunk t;
    tanh_into(kRoot2OverPi * (v + kCubic * v * v * v), t);
    out = 0.5f * v * (1.0f + t);
  });
}

void gelu_tanh_backward_span(const float* g, const float* x, float* out, int64_t n) {
  by_chunks<2>({g, x}, out, n, [](const Chunk& gv, const Chunk& xv, Chunk& result) {
    const Chunk x2 = xv * xv;
    Chunk t;
    tanh_into(kRoot2OverPi * (xv + kCubic * x2 * xv), t);
    const auto dinner = kRoot2OverPi * (1.0f + kCubicSlope * x2);
    result = gv * (0.5f * (1.0f + t) + 0.5f * xv * (1.0f - t * t) * dinner);
  });
}

float max_of_span(const float* x, int64_t n) { return max_of(x, n); }
double max_of_span(const double* x, int64_t n) { return max_of(x, n); }
void divide_span(float* o, float s, int64_t n) { Eigen::Map<Eigen::ArrayXf>(o, n) /= s; }
void divide_span(double* o, double s, int64_t n) { Eigen::Map<Eigen::ArrayXd>(o, n) /= s; }

}  // namespace tg::cpu
