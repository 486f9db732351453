// CompileOptions::shape_buckets: calls padded up to a few sizes share compiled variants, the true
// extent reaches the function (bucket_extent, bucket_mask), and losses and gradients equal eager's
// on the unpadded data; least-recently-used eviction at cache_limit; the advice printed once when a
// dim keeps changing without buckets; errors for bad bucket specs.
#include <gtest/gtest.h>

#include <random>

#include "graphs/compile.h"
#include "nn/nn.h"
#include "optim/optim.h"
#include "support/test_support.h"

namespace tg {
namespace {

using testing::expect_close;
using testing::loss_and_grads;

// mlp_small's layers: 128-256-256-10 with ReLU between.
std::shared_ptr<nn::Sequential> mlp_small(Device device, DType dtype = kFloat32) {
  manual_seed(0);
  auto m = std::make_shared<nn::Sequential>();
  m->push_back(std::make_shared<nn::Linear>(128, 256));
  m->push_back(std::make_shared<nn::ReLU>());
  m->push_back(std::make_shared<nn::Linear>(256, 256));
  m->push_back(std::make_shared<nn::ReLU>());
  m->push_back(std::make_shared<nn::Linear>(256, 10));
  m->to(device);
  m->to(dtype);
  return m;
}

// Batch (dim 0) of x and y padded together; the labels' padding is cross_entropy's ignore_index.
CompileOptions batch_buckets(std::string backend, std::vector<int64_t> sizes) {
  return CompileOptions{.backend = std::move(backend),
                        .input_names = {"x", "y"},
                        .shape_buckets = {{.dims = {{"x", 0}, {"y", 0, -100}}, .sizes = std::move(sizes)}}};
}

// Runs the mlp_small loss over `calls` batch sizes drawn from 1..256, compiled with 8 buckets and
// eagerly on the unpadded batch, and compares losses and gradients; stops at the first call that
// differs (the trace names it).
//
// On CUDA the model runs in float64: products of another row count (the padded one) or with
// cuBLASLt's fused bias and ReLU sum in another order, and a pre-activation within float32
// rounding of 0 then lands on the other side of ReLU's kink. That moves one sample's whole
// gradient (about 1/batch of every weight gradient below it); in float32 such a tie came up in
// about one run in four. In float64 it does not, so the tolerances can be tight.
void expect_mlp_batches_match_eager(CompileOptions options, Device device, DType dtype, int calls, double rtol,
                                    double atol) {
  auto model = mlp_small(device, dtype);
  auto loss = [model](const Tensor& x, const Tensor& y) { return cross_entropy((*model)(x), y); };
  auto f = compile(loss, std::move(options));
  std::mt19937 rng(7);
  std::uniform_int_distribution<int64_t> batch(1, 256);
  for (int i = 0; i < calls && !::testing::Test::HasFailure(); ++i) {
    const int64_t b = batch(rng);
    Tensor x = randn({b, 128}, {.dtype = dtype, .device = device});
    Tensor y = randint(0, 10, {b}, {.device = device});
    const TensorList compiled = loss_and_grads(*model, f(x, y));
    const TensorList eager = loss_and_grads(*model, loss(x, y));
    ASSERT_EQ(compiled.size(), eager.size());
    for (size_t k = 0; k < eager.size(); ++k) {
      SCOPED_TRACE("call " + std::to_string(i) + ", batch " + std::to_string(b) + ", " +
                   (k == 0 ? std::string("loss") : "gradient of parameter " + std::to_string(k - 1)));
      expect_close(compiled[k], eager[k], rtol, atol);
    }
  }
  if (::testing::Test::HasFailure()) return;
  const graphs::CompileCounters& c = f.counters();
  EXPECT_LE(c.compilations, 8);
  EXPECT_EQ(c.eager_fallbacks, 0);
  EXPECT_EQ(c.bucketed_calls, calls);
  EXPECT_EQ(c.bucket_hits, calls - c.compilations);
  EXPECT_GT(c.padded_calls, 0);
  EXPECT_EQ(c.evictions, 0);
  EXPECT_TRUE(c.changing_dims.empty());
}

constexpr int64_t kVocab = 32, kDim = 16, kHeads = 2, kMaxSeq = 512;

// A tiny transformer language model, batch first: token and position embeddings, one pre-norm
// block (causal self-attention, or attention under a key-padding mask), an LM head.
class TinyLM : public nn::Module {
 public:
  explicit TinyLM(bool causal) : causal_(causal) {
    tok_ = register_module("tok", std::make_shared<nn::Embedding>(kVocab, kDim));
    pos_ = register_module("pos", std::make_shared<nn::Embedding>(kMaxSeq, kDim));
    n1_ = register_module("ln_1", std::make_shared<nn::LayerNorm>(Shape{kDim}));
    attn_ = register_module("attn", std::make_shared<nn::MultiheadAttention>(kDim, kHeads, 0.0, true, true));
    n2_ = register_module("ln_2", std::make_shared<nn::LayerNorm>(Shape{kDim}));
    fc_ = register_module("fc", std::make_shared<nn::Linear>(kDim, 2 * kDim));
    proj_ = register_module("proj", std::make_shared<nn::Linear>(2 * kDim, kDim));
    head_ = register_module("head", std::make_shared<nn::Linear>(kDim, kVocab));
  }
  // Logits [B, T, V] of tokens [B, T]; without causality the padding (bucket_padding_mask) is
  // masked out of the keys.
  Tensor forward(const Tensor& tokens) override {
    const int64_t b = tokens.size(0), t = tokens.size(1);
    Tensor h = tok_->forward(tokens) + pos_->forward(arange(t, {.device = tokens.device()}));
    Tensor key_padding = causal_ ? Tensor() : bucket_padding_mask(tokens, 1).unsqueeze(0).expand({b, t});
    Tensor n = n1_->forward(h);
    Tensor a = h + attn_->attend(n, n, n, Tensor(), causal_, key_padding);
    return head_->forward(a + proj_->forward(gelu(fc_->forward(n2_->forward(a)))));
  }
  std::string type_name() const override { return "TinyLM"; }

 private:
  bool causal_;
  std::shared_ptr<nn::Embedding> tok_, pos_;
  std::shared_ptr<nn::LayerNorm> n1_, n2_;
  std::shared_ptr<nn::MultiheadAttention> attn_;
  std::shared_ptr<nn::Linear> fc_, proj_, head_;
};

// Next-token cross-entropy; padded labels are ignore_index.
Tensor lm_loss(TinyLM& model, const Tensor& x, const Tensor& y) {
  const int64_t n = x.size(0) * x.size(1);
  return cross_entropy(model.forward(x).reshape({n, kVocab}), y.reshape({n}));
}

// The sequence dim (1) of token ids and labels padded together, 8 buckets up to 512.
CompileOptions sequence_buckets(std::string backend) {
  return CompileOptions{.backend = std::move(backend),
                        .input_names = {"x", "y"},
                        .shape_buckets = {{.dims = {{"x", 1}, {"y", 1, -100}}, .sizes = evenly_spaced_buckets(512, 8)}}};
}

// The LM loss over `calls` sequence lengths drawn from 17..512, compiled with 8 buckets and eagerly
// on the unpadded batch: losses and gradients compared.
void expect_lm_lengths_match_eager(bool causal, const std::string& backend, Device device, int calls, double rtol,
                                   double atol) {
  manual_seed(0);
  auto model = std::make_shared<TinyLM>(causal);
  model->to(device);
  auto f = compile([model](const Tensor& x, const Tensor& y) { return lm_loss(*model, x, y); },
                   sequence_buckets(backend));
  std::mt19937 rng(11);
  std::uniform_int_distribution<int64_t> length(17, 512);
  for (int i = 0; i < calls; ++i) {
    const int64_t t = length(rng);
    Tensor tokens = randint(0, kVocab, {2, t + 1}, {.device = device});
    Tensor x = tokens.narrow(1, 0, t).contiguous(), y = tokens.narrow(1, 1, t).contiguous();
    const TensorList compiled = loss_and_grads(*model, f(x, y));
    const TensorList eager = loss_and_grads(*model, lm_loss(*model, x, y));
    ASSERT_EQ(compiled.size(), eager.size());
    for (size_t k = 0; k < eager.size(); ++k) expect_close(compiled[k], eager[k], rtol, atol);
  }
  const graphs::CompileCounters& c = f.counters();
  EXPECT_LE(c.compilations, 8);
  EXPECT_EQ(c.eager_fallbacks, 0);
  EXPECT_EQ(c.bucket_hits, calls - c.compilations);
  EXPECT_GT(c.padded_calls, 0);
}

TEST(ShapeBuckets, CausalLmSequenceLengthsMatchEagerOnCpu) { expect_lm_lengths_match_eager(true, "aot_eager", kCPU, 40, 1e-4, 1e-5); }

TEST(ShapeBuckets, KeyPaddingMaskLmSequenceLengthsMatchEagerOnCpu) {
  expect_lm_lengths_match_eager(false, "aot_eager", kCPU, 24, 1e-4, 1e-5);
}

TEST(ShapeBuckets, CausalLmSequenceLengthsMatchEagerOnCuda) {
  TG_REQUIRE_CUDA();
  expect_lm_lengths_match_eager(true, "cudagraphs", cuda_device(), 100, 1e-3, 1e-5);
}

// Training on CUDA: the compiled loss with buckets and CompiledStep against an eager twin, 200
// steps over batch sizes 1..256; parameters equal at the end, at most one recording per variant.
// In float64, for the reason given at expect_mlp_batches_match_eager.
TEST(ShapeBuckets, MlpSmallTrainingWithCudaGraphsMatchesEager) {
  TG_REQUIRE_CUDA();
  const Device dev = cuda_device();
  auto model = mlp_small(dev, kFloat64), twin = mlp_small(dev, kFloat64);
  optim::SGD sgd(model->parameters(), {.lr = 1e-2}), twin_sgd(twin->parameters(), {.lr = 1e-2});
  optim::CompiledStep step(sgd);
  auto f = compile([model](const Tensor& x, const Tensor& y) { return cross_entropy((*model)(x), y); },
                   batch_buckets("cudagraphs", evenly_spaced_buckets(256, 8)));
  std::mt19937 rng(3);
  std::uniform_int_distribution<int64_t> batch(1, 256);
  for (int i = 0; i < 200; ++i) {
    const int64_t b = batch(rng);
    Tensor x = randn({b, 128}, {.dtype = kFloat64, .device = dev});
    Tensor y = randint(0, 10, {b}, {.device = dev});
    Tensor l = f(x, y);
    sgd.zero_grad();
    l.backward();
    step.step();
    Tensor e = cross_entropy((*twin)(x), y);
    twin_sgd.zero_grad();
    e.backward();
    twin_sgd.step();
    expect_close(l, e, 1e-9, 1e-12);
  }
  const TensorList p = model->parameters(), q = twin->parameters();
  for (size_t k = 0; k < p.size(); ++k) expect_close(p[k], q[k], 1e-9, 1e-12);
  const graphs::CompileCounters& c = f.counters();
  EXPECT_LE(c.compilations, 8);
  EXPECT_EQ(c.eager_fallbacks, 0);
  EXPECT_EQ(c.rerecords, 0);
  EXPECT_LE(c.graphs_captured, c.captured_segments);
}

TEST(ShapeBuckets, StrictCaptureHoldsWithBuckets) {
  // Padding runs before the compiled call; inside it, every variant is warmed up, recorded once and
  // replayed, with no work outside CUDA graphs.
  TG_REQUIRE_CUDA();
  const Device dev = cuda_device();
  auto model = mlp_small(dev);
  CompileOptions options = batch_buckets("cudagraphs", {64, 128, 256});
  options.strict_capture = true;
  auto f = compile([model](const Tensor& x, const Tensor& y) { return cross_entropy((*model)(x), y); }, options);
  for (int64_t b : {10, 100, 200, 20, 120, 250, 64, 128, 256, 1}) {
    Tensor l;
    EXPECT_NO_THROW(l = f(randn({b, 128}, {.device = dev}), randint(0, 10, {b}, {.device = dev})));
    model->zero_grad();
    EXPECT_NO_THROW(l.backward());
  }
  EXPECT_EQ(f.counters().compilations, 3);
  EXPECT_EQ(f.counters().rerecords, 0);
}

TEST(ShapeBuckets, BucketSizeHelpers) {
  EXPECT_EQ(evenly_spaced_buckets(512, 8), (std::vector<int64_t>{64, 128, 192, 256, 320, 384, 448, 512}));
  EXPECT_EQ(evenly_spaced_buckets(100, 3), (std::vector<int64_t>{34, 67, 100}));
  EXPECT_EQ(evenly_spaced_buckets(100, 3, 8), (std::vector<int64_t>{40, 72, 104}));
  EXPECT_EQ(evenly_spaced_buckets(3, 8), (std::vector<int64_t>{1, 2, 3}));  // repeats dropped
  EXPECT_EQ(pow2_buckets(17, 512), (std::vector<int64_t>{32, 64, 128, 256, 512}));
  EXPECT_EQ(pow2_buckets(16, 16), (std::vector<int64_t>{16}));
  EXPECT_EQ(pow2_buckets(1, 300), (std::vector<int64_t>{1, 2, 4, 8, 16, 32, 64, 128, 256, 512}));
  EXPECT_THROW_MSG(evenly_spaced_buckets(0, 8), "got max 0, count 8");
  EXPECT_THROW_MSG(pow2_buckets(8, 4), "expected 1 <= min <= max, got min 8, max 4");
}

TEST(ShapeBuckets, MlpSmallBatchesMatchEagerOnCpu) {
  expect_mlp_batches_match_eager(batch_buckets("aot_eager", evenly_spaced_buckets(256, 8)), kCPU, kFloat32, 200, 1e-4,
                                 1e-6);
}

TEST(ShapeBuckets, MlpSmallBatchesMatchEagerOnCuda) {
  TG_REQUIRE_CUDA();
  expect_mlp_batches_match_eager(batch_buckets("cudagraphs", evenly_spaced_buckets(256, 8)), cuda_device(), kFloat64,
                                 200, 1e-9, 1e-12);
}

TEST(ShapeBuckets, MlpSmallBatchesMatchEagerOnCudaWithoutGraphs) {
  TG_REQUIRE_CUDA();
  expect_mlp_batches_match_eager(batch_buckets("aot_eager", evenly_spaced_buckets(256, 8)), cuda_device(), kFloat64,
                                 200, 1e-9, 1e-12);
}

TEST(ShapeBuckets, MlpSmallBatchesMatchEagerOnCudaWithoutFusions) {
  TG_REQUIRE_CUDA();
  CompileOptions options = batch_buckets("aot_eager", evenly_spaced_buckets(256, 8));
  options.fuse_epilogues = options.fuse_elementwise = false;
  expect_mlp_batches_match_eager(options, cuda_device(), kFloat64, 200, 1e-9, 1e-12);
}

TEST(ShapeBuckets, ExtentIsAGraphInputNotAConstant) {
  // The mean over the real rows: one variant serves every extent of its bucket.
  auto f = compile([](const Tensor& x) { return x.sum({0}) / bucket_extent(x, 0); },
                   CompileOptions{.shape_buckets = {{.dims = {{0, 0}}, .sizes = {8}}}});
  for (int64_t rows : {3, 5, 8, 1}) {
    Tensor x = randn({rows, 4});
    expect_close(f(x), x.mean({0}), 1e-5, 1e-6);
  }
  EXPECT_EQ(f.counters().compilations, 1);
  EXPECT_EQ(f.counters().padded_calls, 3);
  EXPECT_EQ(f.counters().bucket_hits, 3);
}

TEST(ShapeBuckets, TwoBucketsOnOneInputPadIndependently) {
  // Rows and columns bucketed apart: the mean over the real block, from both masks and extents.
  auto fn = [](const Tensor& x) {
    Tensor w = bucket_mask(x, 0).to(kFloat32).unsqueeze(1) * bucket_mask(x, 1).to(kFloat32).unsqueeze(0);
    return (x * w).sum() / (bucket_extent(x, 0) * bucket_extent(x, 1));
  };
  auto f = compile(fn, CompileOptions{.shape_buckets = {{.dims = {{0, 0, 5.0}}, .sizes = {4, 8}},
                                                        {.dims = {{0, 1, -5.0}}, .sizes = {16, 32}}}});
  for (auto [r, c] : std::vector<std::pair<int64_t, int64_t>>{{3, 10}, {7, 20}, {2, 30}, {8, 16}, {5, 17}}) {
    Tensor x = randn({r, c});
    expect_close(f(x), x.mean(), 1e-5, 1e-6);
  }
  EXPECT_EQ(f.counters().compilations, 4);
  EXPECT_EQ(f.counters().padded_calls, 4);
}

TEST(ShapeBuckets, OutsideBucketsTheExtentIsTheSize) {
  Tensor x = randn({3, 5});
  EXPECT_EQ(bucket_extent(x, 1).item<int64_t>(), 5);
  EXPECT_EQ(bucket_extent(x, -2).item<int64_t>(), 3);
  EXPECT_TRUE(equal(bucket_mask(x, 0), full({3}, true, {.dtype = kBool})));
  EXPECT_TRUE(equal(bucket_padding_mask(x, 0), full({3}, false, {.dtype = kBool})));
  EXPECT_THROW_MSG(bucket_extent(x, 2), "[bucket_extent] dim 2 is out of range for a tensor of 2 dim(s)");
  EXPECT_THROW_MSG(bucket_mask(x, -3), "[bucket_mask] dim -3 is out of range");
}

TEST(ShapeBuckets, MasksMarkThePadding) {
  auto f = compile([](const Tensor& x) { return TensorList{bucket_mask(x, 1), bucket_padding_mask(x, 1)}; },
                   CompileOptions{.shape_buckets = {{.dims = {{0, -1}}, .sizes = {4, 6}}}});
  const TensorList out = f(randn({2, 5}));
  EXPECT_TRUE(equal(out[0], tensor<bool>({true, true, true, true, true, false})));
  EXPECT_TRUE(equal(out[1], tensor<bool>({false, false, false, false, false, true})));
}

TEST(ShapeBuckets, InputGradientsFlowThroughThePadding) {
  auto f = compile([](const Tensor& x) { return (x * x * bucket_mask(x, 0).unsqueeze(1)).sum(); },
                   CompileOptions{.shape_buckets = {{.dims = {{0, 0, 7.0}}, .sizes = {4, 8}}}});
  Tensor x = randn({5, 3}).requires_grad_(true);
  Tensor out = f(x);
  expect_close(out, (x.detach() * x.detach()).sum(), 1e-5, 1e-6);
  out.backward();
  ASSERT_TRUE(x.grad().defined());
  expect_close(x.grad(), x.detach() * 2, 1e-5, 1e-6);
}

TEST(ShapeBuckets, DeclaredOutputsAreNarrowedBack) {
  manual_seed(1);
  auto lin = std::make_shared<nn::Linear>(4, 3);
  // Per-row outputs [B, 3] narrowed back to B rows; a masked mean as a second output.
  auto fn = [lin](const Tensor& x) {
    Tensor h = (*lin)(x);
    Tensor w = bucket_mask(x, 0).to(kFloat32).unsqueeze(1);
    return TensorList{h, (h * h * w).sum() / bucket_extent(x, 0)};
  };
  auto f = compile(fn, CompileOptions{.shape_buckets = {{.dims = {{0, 0}}, .sizes = {4, 8}, .outputs = {{0, 0}}}}});
  for (int64_t rows : {3, 6, 8}) {
    Tensor x = randn({rows, 4});
    const TensorList got = f(x);
    const TensorList want = fn(x);
    ASSERT_EQ(got[0].sizes(), (Shape{rows, 3}));
    expect_close(got[0], want[0], 1e-5, 1e-6);
    expect_close(got[1], want[1], 1e-5, 1e-6);
    // Gradients through the narrowed output reach the parameters as eager's do.
    const TensorList g = loss_and_grads(*lin, got[0].sum() + got[1]);
    const TensorList e = loss_and_grads(*lin, want[0].sum() + want[1]);
    for (size_t k = 0; k < e.size(); ++k) expect_close(g[k], e[k], 1e-5, 1e-6);
  }
  EXPECT_EQ(f.counters().compilations, 2);
}

TEST(ShapeBuckets, LeastRecentlyUsedEvictionBoundsTheVariants) {
  auto fn = [](const Tensor& x) { return (x * x).sum({0}); };  // zero padding is inert
  auto f = compile(fn, CompileOptions{.cache_limit = 2, .shape_buckets = {{.dims = {{0, 0}}, .sizes = {2, 4, 8, 16}}}});
  // Buckets 4, 8, 4 (a hit), 16 (evicts 8, the least recent), 8 (evicts 4), 16 (a hit).
  for (int64_t rows : {3, 7, 4, 9, 5, 16}) {
    Tensor x = randn({rows, 2});
    expect_close(f(x), fn(x), 1e-5, 1e-6);
  }
  const graphs::CompileCounters& c = f.counters();
  EXPECT_EQ(c.compilations, 4);
  EXPECT_EQ(c.evictions, 2);
  EXPECT_EQ(c.bucket_hits, 2);
  EXPECT_EQ(c.eager_fallbacks, 0);
}

TEST(ShapeBuckets, EvictLruWithoutBuckets) {
  auto f = compile([](const Tensor& x) { return x * 2; }, CompileOptions{.cache_limit = 2, .evict_lru = true});
  for (int64_t n : {1, 2, 3, 1}) f(randn({n}));
  EXPECT_EQ(f.counters().compilations, 4);
  EXPECT_EQ(f.counters().evictions, 2);
  EXPECT_EQ(f.counters().eager_fallbacks, 0);
}

TEST(ShapeBuckets, ChangingDimIsReportedOnceWithTheAdvice) {
  auto f = compile([](const Tensor& x, const Tensor& w) { return x.mm(w); },
                   CompileOptions{.cache_limit = 16, .input_names = {"x", "w"}});
  Tensor w = randn({4, 2});
  ::testing::internal::CaptureStderr();
  for (int64_t n : {4, 5}) f(randn({n, 4}), w);
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
  ::testing::internal::CaptureStderr();
  f(randn({6, 4}), w);
  const std::string first = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(first.find("input 'x' dim 0 took 3 sizes (4, 5, 6)"), std::string::npos) << first;
  EXPECT_NE(first.find("CompileOptions::shape_buckets"), std::string::npos) << first;
  ::testing::internal::CaptureStderr();
  for (int64_t n : {7, 8}) f(randn({n, 4}), w);
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
  ASSERT_EQ(f.counters().changing_dims.size(), 1u);
  EXPECT_NE(f.counters().changing_dims[0].find("input 'x' dim 0"), std::string::npos);
}

TEST(ShapeBuckets, BucketedDimsAreNotReportedAsChanging) {
  auto f = compile([](const Tensor& x) { return x.sum(); },
                   CompileOptions{.shape_buckets = {{.dims = {{0, 0}}, .sizes = {2, 4, 8, 16}}}});
  ::testing::internal::CaptureStderr();
  for (int64_t n : {2, 3, 7, 12}) f(randn({n, 3}));
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
  EXPECT_TRUE(f.counters().changing_dims.empty());
}

TEST(ShapeBuckets, BadSpecsRaiseNamingWhatWasGiven) {
  auto id = [](const Tensor& x, const Tensor& y) { return x + y.sum(); };
  auto make = [&](std::vector<ShapeBucket> b) {
    return compile(id, CompileOptions{.input_names = {"x", "y"}, .shape_buckets = std::move(b)});
  };
  Tensor x = randn({3, 2}), y = randn({4});
  EXPECT_THROW_MSG(make({{.dims = {{"x", 0}}, .sizes = {}}})(x, y), "shape_buckets[0] has no sizes");
  EXPECT_THROW_MSG(make({{.dims = {{"x", 0}}, .sizes = {8, 4}}})(x, y),
                   "shape_buckets[0] sizes [8, 4]: expected strictly ascending sizes");
  EXPECT_THROW_MSG(make({{.dims = {{"x", 0}}, .sizes = {0, 4}}})(x, y), "expected sizes >= 1, got 0");
  EXPECT_THROW_MSG(make({{.dims = {}, .sizes = {4}}})(x, y), "shape_buckets[0] pads no dims");
  EXPECT_THROW_MSG(make({{.dims = {{"x", 0}, {"x", 0}}, .sizes = {4}}})(x, y), "pads input 'x' dim 0 that an earlier");
  EXPECT_THROW_MSG(make({{.dims = {{"z", 0}}, .sizes = {4}}})(x, y),
                   "pads input 'z', which is no tensor argument of this call; tensor arguments: input 'x', input 'y'");
  EXPECT_THROW_MSG(make({{.dims = {{"x", 2}}, .sizes = {4}}})(x, y), "pads input 'x' dim 2, out of range for its 2 dim(s)");
  EXPECT_THROW_MSG(make({{.dims = {{"x", 0}, {"y", 0}}, .sizes = {4}}})(x, y),
                   "input 'y' dim 0 has size 4 but input 'x' dim 0 has size 3");
  EXPECT_THROW_MSG(make({{.dims = {{"x", 0}}, .sizes = {2}}})(x, y),
                   "input 'x' dim 0 has size 3, larger than the largest bucket 2");
  EXPECT_THROW_MSG(make({{.dims = {{"x", 0}}, .sizes = {4}, .outputs = {{1, 0}}}})(x, y),
                   "narrows output 1 but the function returned 1 output(s)");
  EXPECT_THROW_MSG(make({{.dims = {{"x", 0}}, .sizes = {4}, .outputs = {{0, 1}}}})(x, y),
                   "narrows output 0 dim 1 of size 2; expected the bucket's size 4");
  EXPECT_THROW_MSG(make({{.dims = {{"x", 0}}, .sizes = {4}}, {.dims = {{0, -2}}, .sizes = {8}}})(x, y),
                   "which another bucket dim pads already");
}

}  // namespace
}  // namespace tg
