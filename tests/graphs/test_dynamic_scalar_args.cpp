// Declared-dynamic scalar arguments of compiled functions: tg::dynamic(x) passes a number as a 0-dim
// tensor graph input, so a new value every call reuses one compiled graph (guarded on dtype and
// shape, never on value), with the eager function's results.
#include <gtest/gtest.h>

#include <cmath>

#include "graphs/compile.h"
#include "ops/elementwise/binary.h"
#include "ops/elementwise/unary.h"
#include "ops/factory/factory.h"
#include "ops/reduce/reduce.h"
#include "support/test_support.h"

namespace tg {
namespace {

constexpr int kCalls = 1000;

// A declared-dynamic scalar argument: a graph input, so a new value every call reuses one graph
// (forward and backward), with the eager function's results; the same number passed plainly is
// guarded by value and recompiles.
TEST(DynamicScalarArgument, ChangingEveryCallCompilesOnce) {
  auto fn = [](const Tensor& x, const Tensor& alpha, int64_t power) { return mul(pow(sin(x), power), alpha).sum(); };
  auto compiled = compile(fn, {.backend = "aot_eager"});
  const Tensor x0 = randn({4, 3}, {.dtype = kFloat64});
  for (int i = 0; i < kCalls; ++i) {
    const double alpha = 0.5 + 0.001 * i;
    Tensor xe = x0.clone().requires_grad_(true), xc = x0.clone().requires_grad_(true);
    const Tensor ye = fn(xe, tg::dynamic(alpha), 3);
    const Tensor yc = compiled(xc, tg::dynamic(alpha), 3);
    ye.backward();
    yc.backward();
    if (i % 100 == 0 || i == kCalls - 1) {
      testing::expect_close(yc.detach(), ye.detach(), 1e-14, 1e-15);
      testing::expect_close(xc.grad(), xe.grad(), 1e-14, 1e-15);
      // alpha * sum(sin(x)^3), independently.
      testing::expect_close(yc.detach(), mul(pow(sin(x0), 3).sum(), alpha), 1e-13, 1e-15);
    }
  }
  EXPECT_EQ(compiled.counters().compilations, 1);
  EXPECT_EQ(compiled.counters().recompiles, 0);

  // Contrast: a plain double is guarded by value.
  auto guarded = compile([](const Tensor& x, double alpha) { return mul(x, alpha); }, {.backend = "aot_eager"});
  guarded(x0, 0.5);
  guarded(x0, 0.25);
  EXPECT_EQ(guarded.counters().recompiles, 1);
}

// Integers and bools take their own dtypes; the dtype is guarded (a float32 value recompiles), the
// value is not.
TEST(DynamicScalarArgument, DtypeIsGuardedValueIsNot) {
  auto f = compile([](const Tensor& x, const Tensor& n) { return add(x, n); }, {.backend = "aot_eager"});
  const Tensor x = tensor({1.0, 2.0});
  EXPECT_EQ(tg::dynamic(3).dtype, kInt64);
  EXPECT_EQ(tg::dynamic(true).dtype, kBool);
  EXPECT_EQ(tg::dynamic(2.5).dtype, kFloat64);
  for (int n = 0; n < 5; ++n) testing::expect_close(f(x, tg::dynamic(n)), tensor({1.0 + n, 2.0 + n}), 0, 0);
  EXPECT_EQ(f.counters().compilations, 1);
  EXPECT_EQ(f.counters().recompiles, 0);
  testing::expect_close(f(x, tg::dynamic(0.5, kFloat32)), tensor({1.5, 2.5}), 0, 0);
  EXPECT_EQ(f.counters().recompiles, 1);
  ASSERT_EQ(f.counters().recompile_reasons.size(), 1u);
  EXPECT_NE(f.counters().recompile_reasons[0].find("dynamic scalar"), std::string::npos)
      << f.counters().recompile_reasons[0];
}

// On CUDA (cudagraphs), a dynamic CPU scalar feeding CUDA ops is staged to the device on every call:
// one recording follows every value.
TEST(DynamicScalarArgumentCuda, CudaGraphFollowsTheValue) {
  TG_REQUIRE_CUDA();
  auto fn = [](const Tensor& x, const Tensor& alpha) { return mul(exp(x), alpha); };
  auto compiled = compile(fn, {.backend = "cudagraphs"});
  const Tensor x = randn({64}, {.dtype = kFloat64}).to(cuda_device());
  for (int i = 0; i < 50; ++i) {
    const double alpha = 1.0 + 0.1 * i;
    testing::expect_close(compiled(x, tg::dynamic(alpha)).to(kCPU), fn(x, tg::dynamic(alpha)).to(kCPU), 1e-14, 1e-15);
  }
  EXPECT_EQ(compiled.counters().compilations, 1);
  EXPECT_EQ(compiled.counters().recompiles, 0);
  EXPECT_EQ(compiled.counters().rerecords, 0);
}

}  // namespace
}  // namespace tg
