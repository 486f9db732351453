// multinomial: shapes, frequencies against the probabilities (chi-square bounds), sampling without
// replacement (no repeats, the second draw's law), the documented Philox mapping, seeds, strided
// input, bad input, compiled-vs-eager, CPU-vs-CUDA and a top-k sampling step captured in a graph.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <set>
#include <vector>

#include "graphs/compile.h"
#include "graphs/runtime/cudagraph_step.h"
#include "ops/elementwise/compare.h"
#include "ops/factory/factory.h"
#include "ops/index/gather.h"
#include "ops/index/topk.h"
#include "ops/norm/softmax.h"
#include "ops/random/multinomial.h"
#include "ops/random/philox.h"
#include "ops/random/random.h"
#include "support/test_support.h"
#include "tensor/cuda_runtime.h"

namespace tg {
namespace {

Tensor weights(std::vector<double> v, const Shape& s) { return from_vector(v, s); }

// Pearson's statistic of `counts` against probabilities proportional to `w` over `total` draws.
double chi_square(const std::vector<int64_t>& counts, const std::vector<double>& w, int64_t total) {
  double sum_w = 0;
  for (double x : w) sum_w += x;
  double chi = 0;
  for (size_t j = 0; j < w.size(); ++j) {
    if (w[j] == 0) {
      EXPECT_EQ(counts[j], 0) << "category " << j << " has weight 0";
      continue;
    }
    const double expected = static_cast<double>(total) * w[j] / sum_w;
    chi += (static_cast<double>(counts[j]) - expected) * (static_cast<double>(counts[j]) - expected) / expected;
  }
  return chi;
}

std::vector<int64_t> histogram(const std::vector<int64_t>& draws, size_t categories) {
  std::vector<int64_t> counts(categories, 0);
  for (int64_t d : draws) {
    EXPECT_TRUE(d >= 0 && d < static_cast<int64_t>(categories)) << d;
    if (d >= 0 && d < static_cast<int64_t>(categories)) ++counts[static_cast<size_t>(d)];
  }
  return counts;
}

// 0.999 quantiles of the chi-square distribution by degrees of freedom (scipy.stats.chi2.ppf(0.999, k)).
double chi_square_bound(size_t dof) {
  static const double q[] = {0, 10.828, 13.816, 16.266, 18.467, 20.515, 22.458};
  return q[dof];
}

TEST(Multinomial, ShapesAndDtype) {
  const Tensor one = multinomial(weights({1, 2, 3}, {3}), 2);
  EXPECT_EQ(one.sizes(), (Shape{2}));
  EXPECT_EQ(one.dtype(), kInt64);
  EXPECT_EQ(multinomial(weights({1, 2, 3, 4, 5, 6}, {2, 3}), 5, true).sizes(), (Shape{2, 5}));
  EXPECT_EQ(multinomial(empty({0, 3}), 2).sizes(), (Shape{0, 2}));  // torch gives size (0, 2)
  EXPECT_EQ(multinomial(weights({1, 2}, {2}).to(kFloat32), 1).sizes(), (Shape{1}));
}

TEST(Multinomial, WithReplacementFrequenciesMatchTheWeights) {
  manual_seed(123);
  const std::vector<double> w = {1, 0, 2, 3, 4};  // need not sum to 1; the zero is never drawn
  const int64_t n = 40000;
  for (DType dt : {kFloat64, kFloat32, kBFloat16}) {
    const std::vector<int64_t> draws = multinomial(weights(w, {5}).to(dt), n, true).to_vector<int64_t>();
    EXPECT_LT(chi_square(histogram(draws, 5), w, n), chi_square_bound(3)) << dtype_name(dt);
  }
  // Rows of a 2-D input follow their own weights.
  const Tensor two = weights({5, 1, 1, 1, 1, 5}, {2, 3});
  const Tensor d = multinomial(two, n, true);
  EXPECT_LT(chi_square(histogram(d.select(0, 0).to_vector<int64_t>(), 3), {5, 1, 1}, n), chi_square_bound(2));
  EXPECT_LT(chi_square(histogram(d.select(0, 1).to_vector<int64_t>(), 3), {1, 1, 5}, n), chi_square_bound(2));
}

TEST(Multinomial, WithoutReplacementNeverRepeatsAndFollowsSuccessiveDraws) {
  manual_seed(7);
  const std::vector<double> w = {0.1, 0.2, 0.3, 0.4};
  const int64_t rows = 30000;
  std::vector<double> tiled;
  for (int64_t r = 0; r < rows; ++r) tiled.insert(tiled.end(), w.begin(), w.end());
  const std::vector<int64_t> d = multinomial(weights(tiled, {rows, 4}), 4).to_vector<int64_t>();
  std::vector<int64_t> first, second;
  for (int64_t r = 0; r < rows; ++r) {
    std::set<int64_t> seen(d.begin() + r * 4, d.begin() + r * 4 + 4);
    ASSERT_EQ(seen.size(), 4u) << "row " << r << " repeats an index";
    first.push_back(d[static_cast<size_t>(r * 4)]);
    second.push_back(d[static_cast<size_t>(r * 4 + 1)]);
  }
  EXPECT_LT(chi_square(histogram(first, 4), w, rows), chi_square_bound(3));
  // The second draw: P(j) = sum over i != j of p_i * p_j / (1 - p_i).
  std::vector<double> p2(4, 0.0);
  for (size_t j = 0; j < 4; ++j)
    for (size_t i = 0; i < 4; ++i)
      if (i != j) p2[j] += w[i] * w[j] / (1 - w[i]);
  EXPECT_LT(chi_square(histogram(second, 4), p2, rows), chi_square_bound(3));
}

TEST(Multinomial, ZeroWeightsComeLastWithoutReplacement) {
  // torch.multinomial(torch.tensor([1., 0, 0]), 3) -> tensor([0, 1, 2])
  EXPECT_TRUE(equal(multinomial(weights({1, 0, 0}, {3}), 3), from_vector(std::vector<int64_t>{0, 1, 2}, {3})));
  manual_seed(1);
  const std::vector<int64_t> d = multinomial(weights({0, 3, 0, 1, 0}, {5}), 2).to_vector<int64_t>();
  EXPECT_EQ(std::set<int64_t>(d.begin(), d.end()), (std::set<int64_t>{1, 3}));
}

// The documented mapping (ops/random/multinomial_draw.h): with replacement, sample s of row r takes the
// double uniform from words 2 * (e % 2), 2 * (e % 2) + 1 of Philox block offset + e / 2, e = r * m + s.
TEST(Multinomial, DrawsFollowThePhiloxMapping) {
  manual_seed(99);
  const PhiloxState state = Generator::global().state();
  const std::vector<int64_t> d = multinomial(weights({1, 1, 1, 1, 1, 1, 1, 1}, {2, 4}), 5, true).to_vector<int64_t>();
  EXPECT_EQ(Generator::global().offset(), state.offset + 5);  // ceil(2 * 5 / 2) blocks
  for (int64_t e = 0; e < 10; ++e) {
    const PhiloxCounter w = philox_block(state.seed, state.offset + static_cast<uint64_t>(e / 2));
    const double u = uniform_double(w[static_cast<size_t>(2 * (e % 2))], w[static_cast<size_t>(2 * (e % 2) + 1)]);
    EXPECT_EQ(d[static_cast<size_t>(e)], static_cast<int64_t>(u * 4)) << e;
  }
}

TEST(Multinomial, SeededDrawsRepeatAndStridedInputsDrawAlike) {
  const Tensor base = testing::random_tensor({50, 6}, kFloat64, false, 0.0, 1.0);
  const Tensor strided = base.transpose(0, 1).contiguous().transpose(0, 1);  // same values, column-major
  ASSERT_FALSE(strided.is_contiguous());
  for (bool replacement : {false, true}) {
    manual_seed(5);
    const Tensor a = multinomial(base, 4, replacement);
    manual_seed(5);
    EXPECT_TRUE(equal(a, multinomial(strided, 4, replacement)));
    EXPECT_FALSE(equal(a, multinomial(base, 4, replacement)));  // the generator moved on
  }
}

TEST(Multinomial, RejectsBadInput) {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  for (bool replacement : {false, true}) {
    EXPECT_THROW_MSG(multinomial(weights({1, -1, 2}, {3}), 1, replacement),
                     "[multinomial] probability tensor contains either inf, nan or element < 0 (row 0, category 1)");
    EXPECT_THROW_MSG(multinomial(weights({1, inf}, {2}), 1, replacement), "inf, nan or element < 0");
    EXPECT_THROW_MSG(multinomial(weights({nan, 1}, {2}), 1, replacement), "inf, nan or element < 0");
    EXPECT_THROW_MSG(multinomial(weights({1, 1, 0, 0}, {2, 2}), 1, replacement),
                     "[multinomial] invalid multinomial distribution (sum of probabilities <= 0) in row 1");
  }
  EXPECT_THROW_MSG(multinomial(weights({1, 2}, {2}), 3),
                   "cannot sample n_sample > prob_dist.size(-1) samples without replacement: num_samples = 3");
  EXPECT_THROW_MSG(multinomial(weights({1, 2}, {2}), 0), "cannot sample n_sample <= 0 samples");
  EXPECT_THROW_MSG(multinomial(full({}, 1.0), 1), "prob_dist must be 1 or 2 dim");
  EXPECT_THROW_MSG(multinomial(ones({2, 2, 2}), 1), "prob_dist must be 1 or 2 dim");
  EXPECT_THROW_MSG(multinomial(ones({3}, {.dtype = kInt64}), 1), "only supports floating-point dtypes");
  EXPECT_THROW_MSG(multinomial(empty({2, 0}), 1, true), "has no categories");
  EXPECT_NO_THROW(multinomial(weights({1, 2}, {2}), 3, true));
}

TEST(Multinomial, HasNoGradient) {
  Tensor w = weights({1, 2, 3}, {3}).requires_grad_(true);
  EXPECT_FALSE(multinomial(w, 2).requires_grad());
}

// aot_eager redraws on every call; under the same seed it draws what eager draws.
TEST(Multinomial, CompiledDrawsMatchEagerUnderTheSameSeed) {
  auto fn = [](const Tensor& logits) { return multinomial(softmax(logits, -1), 3, false); };
  auto f = compile(fn, {.backend = "aot_eager"});
  const Tensor logits = testing::random_tensor({6, 10});
  for (uint64_t seed : {3u, 3u, 4u}) {
    manual_seed(seed);
    const Tensor compiled = f(logits);
    manual_seed(seed);
    EXPECT_TRUE(equal(compiled, fn(logits))) << seed;
  }
  EXPECT_FALSE(equal(f(logits), f(logits)));
  EXPECT_EQ(f.counters().compilations, 1);
}

// Temperature plus top-k sampling of one token per row, as a language model's sampler does.
Tensor sample_top_k(const Tensor& logits, double temperature, int64_t k) {
  auto [values, indices] = topk(logits / temperature, k);
  const Tensor choice = multinomial(softmax(values, -1), 1);
  return gather(indices, 1, choice);
}

TEST(Multinomial, TopKSamplingStaysInTheTopK) {
  manual_seed(11);
  const Tensor logits = testing::random_tensor({4, 1000}, kFloat32, false, -5, 5);
  const Tensor tokens = sample_top_k(logits, 0.8, 10);
  EXPECT_EQ(tokens.sizes(), (Shape{4, 1}));
  const Tensor top = topk(logits, 10).second;
  for (int64_t r = 0; r < 4; ++r) {
    const std::vector<int64_t> allowed = top.select(0, r).to_vector<int64_t>();
    const int64_t t = tokens.select(0, r).item<int64_t>();
    EXPECT_NE(std::find(allowed.begin(), allowed.end(), t), allowed.end()) << "row " << r;
  }
}

// ---- CUDA ----

TEST(MultinomialCuda, MatchesCpuUnderTheSameSeed) {
  TG_REQUIRE_CUDA();
  for (bool replacement : {false, true}) {
    for (DType dt : {kFloat64, kFloat32}) {
      const Tensor w = testing::random_tensor({64, 300}, kFloat64, false, 0.0, 1.0).to(dt);
      manual_seed(21);
      const std::vector<int64_t> cpu = multinomial(w, 40, replacement).to_vector<int64_t>();
      manual_seed(21);
      const std::vector<int64_t> gpu = multinomial(w.cuda().transpose(0, 1).contiguous().transpose(0, 1), 40,
                                                   replacement).cpu().to_vector<int64_t>();
      // Running sums add in another order on the device; a draw within rounding of a boundary may differ.
      size_t differ = 0;
      for (size_t i = 0; i < cpu.size(); ++i) differ += cpu[i] != gpu[i];
      EXPECT_LE(differ, cpu.size() / 1000) << "replacement=" << replacement << " " << dtype_name(dt);
    }
  }
}

TEST(MultinomialCuda, FrequenciesOnAVocabularySizedRow) {
  TG_REQUIRE_CUDA();
  manual_seed(2);
  const int64_t vocab = 50257, n = 60000;
  std::vector<double> w(static_cast<size_t>(vocab), 0.0);
  w[7] = 1;
  w[1000] = 2;
  w[50000] = 3;
  const Tensor probs = from_vector(w, {vocab}).to(cuda_device(), kFloat32);
  const std::vector<int64_t> with = multinomial(probs, n, true).cpu().to_vector<int64_t>();
  const std::vector<int64_t> counts = histogram(with, static_cast<size_t>(vocab));
  EXPECT_LT(chi_square({counts[7], counts[1000], counts[50000]}, {1, 2, 3}, n), chi_square_bound(2));
  EXPECT_EQ(counts[7] + counts[1000] + counts[50000], n);
  const std::vector<int64_t> without = multinomial(probs, 3).cpu().to_vector<int64_t>();
  EXPECT_EQ(std::set<int64_t>(without.begin(), without.end()), (std::set<int64_t>{7, 1000, 50000}));
}

TEST(MultinomialCuda, BadWeightsAreRaisedAtTheNextSynchronization) {
  TG_REQUIRE_CUDA();
  for (bool replacement : {false, true}) {
    const Tensor bad = weights({1, -1, 2}, {3}).cuda();
    EXPECT_THROW_MSG(multinomial(bad, 1, replacement).cpu(), "[multinomial] probability tensor contains either inf");
    const Tensor zero = weights({1, 1, 0, 0}, {2, 2}).cuda();
    EXPECT_THROW_MSG(multinomial(zero, 1, replacement).cpu(), "sum of probabilities <= 0) in row 1");
    EXPECT_NO_THROW(multinomial(weights({1, 1}, {2}).cuda(), 1, replacement).cpu());  // the record was cleared
  }
}

// The sampling step recorded as a CUDA graph: replays draw afresh, and under the same seed each call
// draws what eager mode draws.
TEST(MultinomialCuda, CapturedSamplingStepMatchesEager) {
  TG_REQUIRE_CUDA();
  auto step = [](const Tensor& logits) { return sample_top_k(logits, 0.7, 50); };
  auto f = compile(step, {.backend = "cudagraphs"});
  const Tensor logits = testing::random_tensor({4, 50257}, kFloat32, false, -3, 3).cuda();
  for (uint64_t seed : {5u, 5u, 6u, 7u, 5u}) {
    mark_step_begin();
    manual_seed(seed);
    const Tensor compiled = f(logits).cpu();
    manual_seed(seed);
    EXPECT_TRUE(equal(compiled, step(logits).cpu())) << seed;
  }
  EXPECT_GE(f.counters().replays, 3);
  mark_step_begin();
  const Tensor a = f(logits).clone();
  mark_step_begin();
  const Tensor b = f(logits).clone();
  EXPECT_FALSE(equal(a, b));  // four rows, each near-uniform over 50 tokens: equal draws are ~1e-7 likely
}

}  // namespace
}  // namespace tg
