// multi_tensor_norm: every tensor's vector norm (orders 1, 2, inf) in one op, against float64
// definitions, on the CPU and on CUDA (many tensors over several launches, tensors over several
// chunks, 16-bit and mixed dtypes, captured in a CUDA graph), and its errors.
#include <gtest/gtest.h>

#include <cmath>

#include "graphs/compile.h"
#include "ops/reduce/multi_tensor_norm.h"
#include "support/test_support.h"
#include "tapegraph.h"

namespace tg {
namespace {

using testing::expect_close;

// The norms by their definition, in float64 on the CPU.
std::vector<double> reference(const TensorList& tensors, double ord) {
  std::vector<double> out;
  for (const Tensor& t : tensors) {
    const std::vector<double> v = t.to(kCPU, kFloat64).contiguous().to_vector<double>();
    double acc = 0;
    for (double x : v) {
      if (ord == 1.0) acc += std::abs(x);
      else if (ord == 2.0) acc += x * x;
      else acc = std::isnan(x) || std::isnan(acc) ? NAN : std::max(acc, std::abs(x));
    }
    out.push_back(ord == 2.0 ? std::sqrt(acc) : acc);
  }
  return out;
}

void expect_norms(const Tensor& got, const std::vector<double>& want, double rtol) {
  const std::vector<double> g = got.to(kCPU, kFloat64).to_vector<double>();
  ASSERT_EQ(g.size(), want.size());
  for (size_t i = 0; i < g.size(); ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(g[i])) << "tensor " << i;
    } else {
      EXPECT_NEAR(g[i], want[i], rtol * std::abs(want[i]) + 1e-12) << "tensor " << i;
    }
  }
}

TensorList mixed_tensors(const Device& dev) {
  manual_seed(4);
  return {randn({3, 4}, {.device = dev}), randn({7}, {.device = dev}), zeros({0}, {.device = dev}),
          randn({2, 3, 5}, {.device = dev}).transpose(0, 2), full({}, -2.5, {.device = dev})};
}

TEST(MultiTensorNorm, EachOrderMatchesTheDefinition) {
  const TensorList ts = mixed_tensors(kCPU);
  for (double ord : {1.0, 2.0, double(INFINITY)}) {
    const Tensor norms = multi_tensor_norm(ts, ord);
    EXPECT_EQ(norms.dtype(), kFloat32);
    EXPECT_EQ(norms.sizes(), Shape({5}));
    expect_norms(norms, reference(ts, ord), 1e-6);
  }
}

TEST(MultiTensorNorm, Float64AnywhereGivesFloat64AndSixteenBitAccumulatesInFloat) {
  manual_seed(5);
  const TensorList ts{randn({64}).to(kBFloat16), randn({5}, {.dtype = kFloat64}), randn({9}).to(kFloat16)};
  const Tensor norms = multi_tensor_norm(ts);
  EXPECT_EQ(norms.dtype(), kFloat64);
  expect_norms(norms, reference(ts, 2.0), 1e-12);
  EXPECT_EQ(multi_tensor_norm({ts[0], ts[2]}).dtype(), kFloat32);
}

TEST(MultiTensorNorm, NanPropagates) {
  const TensorList ts{from_vector<float>({1.f, NAN, 2.f}, {3}), from_vector<float>({3.f, 4.f}, {2})};
  for (double ord : {1.0, 2.0, double(INFINITY)}) {
    const std::vector<float> v = multi_tensor_norm(ts, ord).to_vector<float>();
    EXPECT_TRUE(std::isnan(v[0])) << "ord " << ord;
    EXPECT_FALSE(std::isnan(v[1])) << "ord " << ord;
  }
}

TEST(MultiTensorNorm, RejectsBadInput) {
  EXPECT_THROW_MSG(multi_tensor_norm({}), "expected at least one tensor");
  EXPECT_THROW_MSG(multi_tensor_norm({randn({3})}, 3.0), "ord must be 1, 2 or inf, got 3");
  EXPECT_THROW_MSG(multi_tensor_norm({randn({3}), arange(3)}), "expected floating-point tensors, got int64 at position 1");
  EXPECT_THROW_MSG(multi_tensor_norm({randn({3}), Tensor()}), "tensor 1 is undefined");
}

TEST(MultiTensorNormCuda, ManyTensorsOverSeveralLaunchesMatchTheCpu) {
  TG_REQUIRE_CUDA();
  manual_seed(6);
  TensorList cpu;
  for (int i = 0; i < 300; ++i) cpu.push_back(randn({1 + (i * 37) % 50}));  // more than one table
  cpu.push_back(randn({100000}));                                          // several chunks
  cpu.push_back(zeros({0}));
  cpu.push_back(randn({40000}).to(kBFloat16));
  cpu.push_back(randn({3000}, {.dtype = kFloat64}));
  TensorList dev;
  for (const Tensor& t : cpu) dev.push_back(t.to(cuda_device()));
  for (double ord : {1.0, 2.0, double(INFINITY)}) {
    const Tensor got = multi_tensor_norm(dev, ord);
    EXPECT_TRUE(got.is_cuda());
    EXPECT_EQ(got.dtype(), kFloat64);
    expect_norms(got, reference(cpu, ord), 1e-5);
    expect_close(got.cpu(), multi_tensor_norm(cpu, ord), 1e-5, 1e-9);
  }
  EXPECT_THROW_MSG(multi_tensor_norm({dev[0], cpu[1]}), "expected all tensors on cuda:0 (tensor 0), got cpu at position 1");
}

TEST(MultiTensorNormCuda, CapturedInACudaGraph) {
  TG_REQUIRE_CUDA();
  auto norms = compile([](const std::vector<Tensor>& ts) { return multi_tensor_norm(ts); }, {.backend = "cudagraphs"});
  for (int call = 0; call < 4; ++call) {
    manual_seed(20 + call);
    const std::vector<Tensor> ts{randn({5000}, {.device = cuda_device()}), randn({17, 3}, {.device = cuda_device()})};
    expect_norms(norms(ts), reference(ts, 2.0), 1e-5);
  }
  EXPECT_EQ(norms.counters().graphs_captured, 1);
  EXPECT_GE(norms.counters().replays, 2);
}

}  // namespace
}  // namespace tg
