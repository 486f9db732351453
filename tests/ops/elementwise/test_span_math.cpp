// The CPU's vectorized float32 spans (ops/elementwise/cpu/span_math.h) against the scalar functors
// computed in double: within a few float ulps over a sweep of values, exact at the special values
// (NaN, infinities, signed zeros, saturation), the same bits for an element wherever it sits in a
// span, in place too; and the ops that run them agree with their per-element (strided) loop.
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <vector>

#include "ops/elementwise/cpu/span_math.h"
#include "ops/elementwise/elementwise.h"
#include "support/test_support.h"

namespace tg {
namespace {

constexpr float kInfF = std::numeric_limits<float>::infinity();
constexpr float kNaNF = std::numeric_limits<float>::quiet_NaN();

// Values from -range to range in `count` steps, then the special ones.
std::vector<float> sweep(float range, int count) {
  std::vector<float> v;
  for (int i = 0; i <= count; ++i) v.push_back(-range + 2 * range * static_cast<float>(i) / static_cast<float>(count));
  for (float s : {0.0f, -0.0f, 1e-30f, -1e-30f, 3e-5f, 1e-3f, -1e-3f, 50.0f, -50.0f, 1e4f, -1e4f, kInfF, -kInfF, kNaNF})
    v.push_back(s);
  return v;
}

// Expects got[i] within `ulps` float ulps of the double reference, an ulp taken at scale[i] (the
// size of the terms the formula adds, where it cancels) or at the value, whichever is larger, and
// floored at the smallest normal; NaN exactly where the reference is NaN, and the infinity where
// it overflows float.
void expect_near_reference(const std::vector<float>& got, const std::vector<double>& want, double ulps,
                           const std::vector<float>& args, const std::vector<double>& scale) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << "x = " << args[i] << ": got " << got[i] << ", expected NaN";
      continue;
    }
    if (std::isinf(static_cast<float>(want[i]))) {  // past the float range: an infinity
      EXPECT_EQ(got[i], static_cast<float>(want[i])) << "x = " << args[i];
      continue;
    }
    const double at = std::max({std::abs(want[i]), scale[i], double(std::numeric_limits<float>::min())});
    EXPECT_LE(std::abs(double(got[i]) - want[i]), ulps * std::numeric_limits<float>::epsilon() * at)
        << "x = " << args[i] << ": got " << got[i] << ", expected " << want[i];
  }
}

// A unary span against `ref` in double over a sweep, then in place over every short length.
template <typename Span, typename Ref, typename Scale>
void check_unary(Span span, Ref ref, Scale scale_of, float range, double ulps) {
  const std::vector<float> x = sweep(range, 4001);
  std::vector<float> y(x.size());
  span(x.data(), y.data(), static_cast<int64_t>(x.size()));
  std::vector<double> want, scale;
  for (float v : x) {
    want.push_back(ref(double(v)));
    scale.push_back(std::isfinite(v) ? scale_of(double(v)) : 0.0);
  }
  expect_near_reference(y, want, ulps, x, scale);
  // In place, and every length up to past two vectors (the tails of the vector loop).
  for (int64_t n = 0; n <= 40; ++n) {
    std::vector<float> z(x.begin(), x.begin() + n);
    span(z.data(), z.data(), n);
    for (int64_t i = 0; i < n; ++i) EXPECT_EQ(z[size_t(i)], y[size_t(i)]) << "in place, n " << n;
  }
}

double no_scale(double) { return 0; }

TEST(SpanMath, TanhMatchesDoubleWithinUlps) {
  check_unary(cpu::tanh_span, [](double v) { return std::tanh(v); }, no_scale, 12.0f, 4);
  check_unary(cpu::tanh_span, [](double v) { return std::tanh(v); }, no_scale, 0.6f, 4);  // around the switch
}

TEST(SpanMath, TanhOfNanIsNanAndSaturates) {
  std::vector<float> x{kNaNF, kInfF, -kInfF, 20.0f, -20.0f, 0.0f, -0.0f}, y(x.size());
  cpu::tanh_span(x.data(), y.data(), static_cast<int64_t>(x.size()));
  EXPECT_TRUE(std::isnan(y[0]));
  EXPECT_EQ(y[1], 1.0f);
  EXPECT_EQ(y[2], -1.0f);
  EXPECT_EQ(y[3], 1.0f);
  EXPECT_EQ(y[4], -1.0f);
  EXPECT_EQ(y[5], 0.0f);
  EXPECT_TRUE(std::signbit(y[6]));
}

TEST(SpanMath, GeluTanhAndItsGradientMatchTheFunctorsInDouble) {
  const ew::GeluTanhFn<double> gelu;
  const ew::GeluTanhBackwardFn<double> gelu_grad;
  // 0.5 x (1 + tanh(u)) cancels where tanh(u) nears -1: an ulp of x is the scale there.
  check_unary(cpu::gelu_tanh_span, [&](double v) { return gelu(v); }, [](double v) { return std::abs(v); }, 10.0f, 4);
  // The gradient over more than one chunk, against g = 1.5 and g = -0.25.
  const std::vector<float> x = sweep(9.0f, 5001);
  for (float g : {1.5f, -0.25f}) {
    const std::vector<float> gs(x.size(), g);
    std::vector<float> out(x.size());
    cpu::gelu_tanh_backward_span(gs.data(), x.data(), out.data(), static_cast<int64_t>(x.size()));
    std::vector<double> want, scale;
    for (float v : x) {
      want.push_back(gelu_grad(double(g), double(v)));
      // Its two terms, 0.5 (1 + t) and 0.5 x (1 - t^2) u', are of size up to 1 + |x| (1 + x^2).
      scale.push_back(std::isfinite(v) ? std::abs(g) * (1 + std::abs(v) * (1 + double(v) * v)) : 0.0);
    }
    expect_near_reference(out, want, 8, x, scale);
  }
}

// The ops reach the spans through the dense loop, and strided inputs (the per-element path) agree.
TEST(SpanMath, OpsAgreeOnDenseAndStridedInputs) {
  const Tensor wide = randn({64, 66}) * 3.0;
  const Tensor strided = wide.slice(1, 0, std::nullopt, 2);  // every other column: the scalar loop
  const Tensor x = strided.contiguous();                      // the same values, dense: the spans
  ASSERT_FALSE(strided.is_contiguous());
  // GELU's cancellation near tanh(u) = -1 leaves errors of a few ulps of x, not of the value.
  testing::expect_close(gelu(x, "tanh"), gelu(strided, "tanh"), 1e-5, 4e-6);
  testing::expect_close(tanh(x), tanh(strided), 1e-6, 1e-7);
  const Tensor g = randn({64, 33});
  testing::expect_close(gelu_backward(g, x, true), gelu_backward(g, strided, true), 1e-5, 2e-5);
  testing::expect_close(softmax(x, 1), softmax(strided, 1), 1e-6, 1e-7);
  testing::expect_close(log_softmax(x, 1), log_softmax(strided, 1), 1e-6, 1e-6);
}

}  // namespace
}  // namespace tg
