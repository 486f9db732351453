// BatchNorm with momentum = None (cumulative moving average) and Embedding's max_norm (in-place
// renormalization of the looked-up rows), against PyTorch 1.13 values, eager and compiled.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "graphs/compile.h"
#include "nn/embedding.h"
#include "nn/norm.h"
#include "support/test_support.h"
#include "support/values.h"

namespace tg {
namespace {

using testing::expect_close;
using testing::expect_values;
using testing::pattern;
using testing::random_tensor;

// bn = nn.BatchNorm1d(3, momentum=None, dtype=torch.float64); for step in range(3):
// bn(pattern((4, 3), 30 + step) * (step + 1)); then bn.eval(); bn(pattern((2, 3), 40))
TEST(BatchNormMomentumNone, CumulativeAverageMatchesPyTorch) {
  nn::BatchNorm1d bn(3, 1e-5, std::nullopt, true, true, {.dtype = kFloat64});
  EXPECT_FALSE(bn.momentum().has_value());
  EXPECT_EQ(bn.to_string(), "BatchNorm1d(3, eps=1e-05, momentum=None, affine=true, track_running_stats=true)");
  // PyTorch's state_dict keys: weight, bias, running_mean, running_var, num_batches_tracked.
  const auto sd = bn.state_dict();
  std::vector<std::string> keys;
  for (const auto& [k, _] : sd) keys.push_back(k);
  EXPECT_EQ(keys, (std::vector<std::string>{"bias", "num_batches_tracked", "running_mean", "running_var", "weight"}));
  EXPECT_EQ(sd.at("num_batches_tracked").dtype(), kInt64);
  EXPECT_EQ(sd.at("num_batches_tracked").dim(), 0);
  const std::vector<std::vector<double>> means = {{0.125, -0.024999999999999994, -0.17500000000000002},
                                                  {0.21250000000000005, -0.012500000000000025, -0.23750000000000004},
                                                  {0.31666666666666676, 0.016666666666666635, -0.2833333333333334}};
  const std::vector<std::vector<double>> vars = {{0.3091666666666667, 0.30916666666666665, 0.3091666666666667},
                                                 {0.80125, 0.6879166666666666, 0.80125},
                                                 {1.461666666666667, 1.3861111111111106, 1.461666666666667}};
  for (int step = 0; step < 3; ++step) {
    SCOPED_TRACE(step);
    const Tensor x = pattern({4, 3}, 30 + step) * static_cast<double>(step + 1);
    // The output is the ordinary training-mode batch norm.
    expect_close(bn(x), batch_norm(x, Tensor(), Tensor(), bn.weight(), bn.bias(), true), 1e-12, 1e-12);
    expect_values(bn.running_mean(), means[static_cast<size_t>(step)], 1e-12);
    expect_values(bn.running_var(), vars[static_cast<size_t>(step)], 1e-12);
    EXPECT_EQ(bn.num_batches_tracked().item<int64_t>(), step + 1);
  }
  bn.eval();
  expect_values(bn(pattern({2, 3}, 40)),
                {-0.09649862663639522, -0.6936561492288394, 0.1516406990000495, 0.23435380754553092,
                 -0.3539061985861426, 0.4824931331819757},
                1e-12);
  EXPECT_EQ(bn.num_batches_tracked().item<int64_t>(), 3);  // eval does not count
}

TEST(BatchNormMomentumNone, Float32AndWithoutRunningStats) {
  nn::BatchNorm2d bn(2, 1e-5, std::nullopt);
  nn::BatchNorm2d ref(2, 1e-5, 0.1);
  const Tensor x = random_tensor({3, 2, 2, 2}, kFloat32), y = random_tensor({3, 2, 2, 2}, kFloat32);
  bn(x);
  expect_close(bn.running_mean(), mean(x, {0, 2, 3}), 1e-6, 1e-7);  // step 1: factor 1
  expect_close(bn.running_var(), var(x, {0, 2, 3}), 1e-6, 1e-7);
  bn(y);
  expect_close(bn.running_mean(), (mean(x, {0, 2, 3}) + mean(y, {0, 2, 3})) * 0.5, 1e-6, 1e-7);
  expect_close(bn.running_var(), (var(x, {0, 2, 3}) + var(y, {0, 2, 3})) * 0.5, 1e-6, 1e-7);
  nn::BatchNorm1d untracked(3, 1e-5, std::nullopt, true, false);
  EXPECT_EQ(untracked.named_buffers().size(), 0u);
  const Tensor z = random_tensor({4, 3}, kFloat32);
  expect_close(untracked(z), batch_norm(z, Tensor(), Tensor(), Tensor(), Tensor(), true), 1e-6, 1e-7);
}

TEST(BatchNormMomentumNone, Gradients) {
  auto bn = std::make_shared<nn::BatchNorm1d>(3, 1e-5, std::nullopt, true, true, TensorOptions{.dtype = kFloat64});
  testing::expect_gradcheck([bn](const TensorList& in) { return (*bn)(in[0]); },
                            {random_tensor({5, 3}, kFloat64, true)});
}

// The count stays a tensor, so a compiled step updates the buffers as eager mode does.
TEST(BatchNormMomentumNone, CompiledMatchesEager) {
  auto eager = std::make_shared<nn::BatchNorm1d>(3, 1e-5, std::nullopt, true, true, TensorOptions{.dtype = kFloat64});
  auto compiled_bn =
      std::make_shared<nn::BatchNorm1d>(3, 1e-5, std::nullopt, true, true, TensorOptions{.dtype = kFloat64});
  auto step = compile([compiled_bn](const Tensor& x) { return (*compiled_bn)(x); }, {.backend = "aot_eager"});
  for (int i = 0; i < 3; ++i) {
    SCOPED_TRACE(i);
    const Tensor x = random_tensor({4, 3}, kFloat64, true);
    const Tensor xc = x.detach().clone().requires_grad_(true);
    const Tensor ye = (*eager)(x), yc = step(xc);
    expect_close(yc, ye, 1e-12, 1e-12);
    (ye * ye).sum().backward();
    (yc * yc).sum().backward();
    expect_close(xc.grad(), x.grad(), 1e-10, 1e-12);
    expect_close(compiled_bn->running_mean(), eager->running_mean(), 1e-12, 1e-12);
    expect_close(compiled_bn->running_var(), eager->running_var(), 1e-12, 1e-12);
    EXPECT_EQ(compiled_bn->num_batches_tracked().item<int64_t>(), i + 1);
  }
  EXPECT_EQ(step.counters().compilations, 1);
  EXPECT_EQ(step.counters().compiled_calls, 3);
}

// emb = nn.Embedding(5, 3, max_norm=m, norm_type=p, dtype=torch.float64); weight = pattern((5, 3), 1) * 3;
// idx = [[0, 2], [2, 4]]; out = emb(idx); (out * pattern((2, 2, 3), 2)).sum().backward()
struct RenormCase {
  double max_norm, norm_type;
  std::vector<double> out, weight;
};

const std::vector<double> kGrad = {0.1, 0.8, -0.2, 0.0, 0.0, 0.0, -0.30000000000000004, -0.6, 0.8,
                                   0.0, 0.0, 0.0, -0.4, 0.3, -0.7};

const std::vector<RenormCase>& renorm_cases() {
  static const std::vector<RenormCase> cases = {
      {1.0, 2.0,
       {0.6804137865755756, -0.6804137865755756, 0.27216551463023025, -0.46499053695725995, 0.3487429027179449,
        -0.8137334396752046, -0.46499053695725995, 0.3487429027179449, -0.8137334396752046, 0.5494422306375246,
        -0.8241633459562867, 0.13736055765938116},
       {0.6804137865755756, -0.6804137865755756, 0.27216551463023025, -2.4000000000000004, -0.30000000000000004,
        1.7999999999999998, -0.46499053695725995, 0.3487429027179449, -0.8137334396752046, 0.0, 2.0999999999999996,
        -0.8999999999999999, 0.5494422306375246, -0.8241633459562867, 0.13736055765938116}},
      {1.5, 1.0,
       {0.6249999826388895, -0.6249999826388895, 0.24999999305555579, -0.42857141836734725, 0.3214285637755104,
        -0.7499999821428575, -0.42857141836734725, 0.3214285637755104, -0.7499999821428575, 0.5454545289256205,
        -0.8181817933884306, 0.13636363223140513},
       {0.6249999826388895, -0.6249999826388895, 0.24999999305555579, -2.4000000000000004, -0.30000000000000004,
        1.7999999999999998, -0.42857141836734725, 0.3214285637755104, -0.7499999821428575, 0.0, 2.0999999999999996,
        -0.8999999999999999, 0.5454545289256205, -0.8181817933884306, 0.13636363223140513}},
      {0.5, INFINITY,
       {0.4999999666666689, -0.4999999666666689, 0.19999998666666757, -0.2857142721088443, 0.21428570408163317,
        -0.49999997619047737, -0.2857142721088443, 0.21428570408163317, -0.49999997619047737, 0.33333331481481593,
        -0.4999999722222238, 0.08333332870370398},
       {0.4999999666666689, -0.4999999666666689, 0.19999998666666757, -2.4000000000000004, -0.30000000000000004,
        1.7999999999999998, -0.2857142721088443, 0.21428570408163317, -0.49999997619047737, 0.0, 2.0999999999999996,
        -0.8999999999999999, 0.33333331481481593, -0.4999999722222238, 0.08333332870370398}}};
  return cases;
}

std::shared_ptr<nn::Embedding> make_embedding(double max_norm, double norm_type, DType dtype = kFloat64) {
  auto emb = std::make_shared<nn::Embedding>(5, 3, std::nullopt, max_norm, norm_type, TensorOptions{.dtype = dtype});
  NoGradGuard no_grad;
  emb->weight().copy_(pattern({5, 3}, 1, dtype) * 3.0);
  return emb;
}

const Tensor& renorm_indices() {
  static const Tensor idx = from_vector<int64_t>({0, 2, 2, 4}, {2, 2});
  return idx;
}

TEST(EmbeddingMaxNorm, RenormalizesLookedUpRowsInPlace) {
  for (const RenormCase& c : renorm_cases()) {
    SCOPED_TRACE(c.norm_type);
    auto emb = make_embedding(c.max_norm, c.norm_type);
    const Tensor out = (*emb)(renorm_indices());
    expect_values(out, c.out, 1e-12);
    expect_values(emb->weight(), c.weight, 1e-12);  // rows 1 and 3 (not looked up) keep their norm > max_norm
    (out * pattern({2, 2, 3}, 2)).sum().backward();
    expect_values(emb->weight().grad(), kGrad, 1e-12);
    // float32: the norm in float32, the factor in double, as PyTorch's kernel.
    auto f32 = make_embedding(c.max_norm, c.norm_type, kFloat32);
    expect_values((*f32)(renorm_indices()), c.out, 1e-6);
    expect_values(f32->weight(), c.weight, 1e-6);
  }
  EXPECT_EQ(make_embedding(1.0, 2.0)->to_string(), "Embedding(5, 3, max_norm=1.0)");
  EXPECT_EQ(make_embedding(1.5, 1.0)->to_string(), "Embedding(5, 3, max_norm=1.5, norm_type=1.0)");
}

TEST(EmbeddingMaxNorm, Functional) {
  Tensor w = pattern({5, 3}, 1) * 3.0;
  const Tensor before = w.clone();
  const Tensor out = embedding(w, renorm_indices(), std::nullopt, 1.0);
  expect_values(out, renorm_cases()[0].out, 1e-12);
  expect_values(w, renorm_cases()[0].weight, 1e-12);  // F.embedding(idx, w, max_norm=1.0) modifies w
  // A second lookup finds the rows within max_norm (norm max_norm / (norm + 1e-7) * norm < max_norm).
  const Tensor again = w.clone();
  embedding_renorm_(w, renorm_indices(), 1.0);
  expect_close(w, again, 0, 0);
  // No indices: nothing to do; bad input.
  Tensor w2 = before.clone();
  embedding_renorm_(w2, zeros({0}, {.dtype = kInt64}), 0.1);
  expect_close(w2, before, 0, 0);
  Tensor wi = zeros({5, 3}, {.dtype = kInt64});
  EXPECT_THROW_MSG(embedding_renorm_(wi, renorm_indices(), 1.0),
                   "[embedding_renorm_] expected a floating weight, got int64");
  EXPECT_THROW_MSG(embedding_renorm_(w2, zeros({2}), 1.0), "Long, Int; but got float32");
  // Non-contiguous weight and indices.
  Tensor wt = (pattern({3, 5}, 1) * 3.0).t();
  Tensor wc = wt.contiguous();
  const Tensor idx_nc = from_vector<int64_t>({0, 9, 2, 9, 2, 9, 4, 9}, {2, 4}).slice(1, 0, 4, 2);
  expect_close(embedding(wt, idx_nc, std::nullopt, 1.0), embedding(wc, idx_nc.contiguous(), std::nullopt, 1.0), 0, 0);
  expect_close(wt, wc, 0, 0);
}

// The renormalization is an in-place write into a captured parameter: the compiled graph
// functionalizes it and copies the result back, so weights, outputs and gradients match eager mode.
TEST(EmbeddingMaxNorm, CompiledMatchesEager) {
  auto eager = make_embedding(1.0, 2.0);
  auto compiled_emb = make_embedding(1.0, 2.0);
  auto fn = compile([compiled_emb](const Tensor& idx, const Tensor& s) { return (*compiled_emb)(idx) * s; },
                    {.backend = "aot_eager"});
  const std::vector<std::vector<int64_t>> lookups = {{0, 2, 2, 4}, {1, 3, 1, 0}, {4, 4, 3, 2}};
  for (const auto& ids : lookups) {
    const Tensor idx = from_vector<int64_t>(ids, {2, 2});
    const Tensor s = random_tensor({2, 2, 3}, kFloat64, true);
    eager->zero_grad();
    compiled_emb->zero_grad();
    const Tensor ye = (*eager)(idx) * s;
    const Tensor yc = fn(idx, s);
    expect_close(yc, ye, 1e-12, 1e-12);
    expect_close(compiled_emb->weight(), eager->weight(), 1e-12, 1e-12);
    ye.sum().backward();
    yc.sum().backward();
    expect_close(compiled_emb->weight().grad(), eager->weight().grad(), 1e-12, 1e-12);
  }
  EXPECT_EQ(fn.counters().compilations, 1);
  EXPECT_EQ(fn.counters().compiled_calls, 3);
  EXPECT_EQ(fn.counters().eager_fallbacks, 0);
}

TEST(EmbeddingMaxNorm, CudaMatchesCpu) {
  TG_REQUIRE_CUDA();
  for (const RenormCase& c : renorm_cases()) {
    auto cpu = make_embedding(c.max_norm, c.norm_type, kFloat32);
    auto gpu = make_embedding(c.max_norm, c.norm_type, kFloat32);
    gpu->to(cuda_device());
    expect_close((*gpu)(renorm_indices().to(cuda_device())), (*cpu)(renorm_indices()), 1e-6, 1e-7);
    expect_close(gpu->weight(), cpu->weight(), 1e-6, 1e-7);
  }
}

TEST(BatchNormMomentumNone, CudaMatchesCpu) {
  TG_REQUIRE_CUDA();
  nn::BatchNorm1d cpu(3, 1e-5, std::nullopt);
  nn::BatchNorm1d gpu(3, 1e-5, std::nullopt);
  gpu.to(cuda_device());
  for (int i = 0; i < 3; ++i) {
    const Tensor x = random_tensor({6, 3, 4}, kFloat32);
    expect_close(gpu(x.to(cuda_device())), cpu(x), 1e-5, 1e-6);
  }
  expect_close(gpu.running_mean(), cpu.running_mean(), 1e-5, 1e-6);
  expect_close(gpu.running_var(), cpu.running_var(), 1e-5, 1e-6);
}

}  // namespace
}  // namespace tg
