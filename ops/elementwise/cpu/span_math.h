// Float32 spans of the elementwise functions built on tanh, whose scalar form calls libm's tanhf
// (some 16 ns an element on normally distributed inputs): the CPU's dense loop (loops.h) hands a
// whole contiguous span of these functors to SpanKernel instead of calling them per element, and
// they run on Eigen's vectorized tanh. The formulas are the functors' (elementwise_math.h). Also
// the vectorized steps of a contiguous softmax row (its maximum, its division).
#pragma once

#include <cstdint>

#include "ops/elementwise/elementwise_math.h"

namespace tg::cpu {

// y = tanh(x) over n floats.
void tanh_span(const float* x, float* y, int64_t n);
// y = gelu(x) with the tanh approximation over n floats.
void gelu_tanh_span(const float* x, float* y, int64_t n);
// out = g * gelu_tanh'(x) over n floats.
void gelu_tanh_backward_span(const float* g, const float* x, float* out, int64_t n);

// The largest of x[0..n) (n > 0), NaN when any is NaN: a row's maximum, vectorized.
float max_of_span(const float* x, int64_t n);
double max_of_span(const double* x, int64_t n);
// o[j] = o[j] / s over n elements, vectorized (each quotient rounds as the scalar one does).
void divide_span(float* o, float s, int64_t n);
void divide_span(double* o, double s, int64_t n);

// A functor's whole-span kernel, where it has one: run(data, n) with data[0] the output and
// data[1..] the inputs, as the dense loop gets them.
template <typename F>
struct SpanKernel {
  static constexpr bool kAvailable = false;
};

namespace span_detail {
inline const float* in(char* const* data, int k) { return reinterpret_cast<const float*>(data[k]); }
inline float* out(char* const* data) { return reinterpret_cast<float*>(data[0]); }
}  // namespace span_detail

template <>
struct SpanKernel<ew::TanhFn<float>> {
  static constexpr bool kAvailable = true;
  static void run(char* const* d, int64_t n) { tanh_span(span_detail::in(d, 1), span_detail::out(d), n); }
};
template <>
struct SpanKernel<ew::GeluTanhFn<float>> {
  static constexpr bool kAvailable = true;
  static void run(char* const* d, int64_t n) { gelu_tanh_span(span_detail::in(d, 1), span_detail::out(d), n); }
};
template <>
struct SpanKernel<ew::GeluTanhBackwardFn<float>> {
  static constexpr bool kAvailable = true;
  static void run(char* const* d, int64_t n) {
    gelu_tanh_backward_span(span_detail::in(d, 1), span_detail::in(d, 2), span_detail::out(d), n);
  }
};

}  // namespace tg::cpu
