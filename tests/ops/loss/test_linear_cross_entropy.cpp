// linear_cross_entropy: values and gradients against PyTorch literals, finite differences and the
// composed cross_entropy(linear(...)) over chunk sizes, reductions, ignored rows and layouts;
// autocast, compiled graphs, the GPT loss and the errors. CUDA tests are in
// test_linear_cross_entropy_cuda.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "graphs/compile.h"
#include "nn/transformer/gpt.h"
#include "support/test_support.h"
#include "support/values.h"

namespace tg {
namespace {

using testing::expect_close;
using testing::make;
using testing::random_tensor;

Tensor labels(std::vector<int64_t> v) { return from_vector(v, {static_cast<int64_t>(v.size())}); }

// Random class targets in [0, classes), with every `ignore_every`-th row (if > 0) set to ignore_index.
Tensor random_targets(int64_t rows, int64_t classes, int64_t ignore_every = 0, int64_t ignore_index = -100) {
  std::vector<int64_t> v(static_cast<size_t>(rows));
  for (int64_t i = 0; i < rows; ++i) {
    v[static_cast<size_t>(i)] = (i * 7 + 3) % classes;
    if (ignore_every > 0 && i % ignore_every == 1) v[static_cast<size_t>(i)] = ignore_index;
  }
  return labels(v);
}

// The loss, then the gradients w.r.t. x, w and b (b's only when it is defined), of either the fused
// op or the composed cross_entropy(linear(...)). A per-row loss is weighted by `row_weights` before
// summing, so that each row's gradient factor is exercised.
TensorList loss_and_grads(bool fused, const Tensor& x0, const Tensor& w0, const Tensor& b0, const Tensor& target,
                          const LinearCrossEntropyOptions& o, const Tensor& row_weights = Tensor()) {
  const Tensor x = x0.detach().requires_grad_(true);
  const Tensor w = w0.detach().requires_grad_(true);
  const Tensor b = b0.defined() ? b0.detach().requires_grad_(true) : Tensor();
  const Tensor loss =
      fused ? linear_cross_entropy(x, w, b, target, o)
            : cross_entropy(linear(x, w, b), target,
                            CrossEntropyOptions{.ignore_index = o.ignore_index, .reduction = o.reduction});
  Tensor scalar = loss;
  if (o.reduction == Reduction::None) scalar = (loss * row_weights.to(loss.dtype())).sum();
  scalar.backward();
  TensorList r{loss.detach(), x.grad(), w.grad()};
  if (b.defined()) r.push_back(b.grad());
  return r;
}

void expect_all_close(const TensorList& got, const TensorList& want, double rtol, double atol) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    SCOPED_TRACE("result " + std::to_string(i));
    ASSERT_TRUE(got[i].defined());
    EXPECT_EQ(got[i].dtype(), want[i].dtype());
    expect_close(got[i], want[i], rtol, atol);
  }
}

// x, w, b of a 3-row, 2-feature, 4-class problem that the PyTorch references below rebuild.
struct Small {
  Tensor x = make({0.5, -1.0, 1.5, 0.25, -0.75, 2.0}, kFloat64, {3, 2});
  Tensor w = make({0.1, 0.2, -0.3, 0.4, 0.5, -0.6, 0.7, 0.8}, kFloat64, {4, 2});
  Tensor b = make({0.01, -0.02, 0.03, 0.04});
};

// x = torch.tensor([[0.5,-1.0],[1.5,0.25],[-0.75,2.0]], dtype=torch.float64, requires_grad=True)
// W = torch.tensor([[0.1,0.2],[-0.3,0.4],[0.5,-0.6],[0.7,0.8]], dtype=torch.float64, requires_grad=True)
// b = torch.tensor([0.01,-0.02,0.03,0.04], dtype=torch.float64, requires_grad=True)
// F.cross_entropy(F.linear(x, W, b), torch.tensor([2, 0, 3])).backward()
TEST(LinearCrossEntropy, MatchesPyTorchMean) {
  const Small s;
  for (int64_t chunk : {0, 1, 2}) {
    const TensorList r = loss_and_grads(true, s.x, s.w, s.b, labels({2, 0, 3}), {.chunk_rows = chunk});
    testing::expect_values(r[0], {1.1026137669048108}, 1e-12);
    testing::expect_values(r[1], {-0.04933609922061729, 0.16189190310748847, 0.11900876203838136, 0.03657257272284173,
                                  -0.1629228984980263, -0.10055664827772193}, 1e-12);
    testing::expect_values(r[2], {-0.4321767265097191, -0.007703333258060746, -0.025030660449120386,
                                  0.2122988627435874, 0.04149714517084387, 0.19540322238544525, 0.4157102417879957,
                                  -0.3999987518709719}, 1e-12);
    testing::expect_values(r[3], {-0.15072800993686966, 0.19595156258896596, -0.061322604732909125,
                                  0.016099052080812942}, 1e-12);
  }
}

// The same with torch.tensor([2, -100, 3]): Mean divides by the 2 rows not ignored.
TEST(LinearCrossEntropy, MatchesPyTorchMeanWithAnIgnoredRow) {
  const Small s;
  const TensorList r = loss_and_grads(true, s.x, s.w, s.b, labels({2, -100, 3}), {.chunk_rows = 2});
  testing::expect_values(r[0], {0.7558341698718118}, 1e-12);
  testing::expect_values(r[1], {-0.07400414883092593, 0.24283785466123273, 0.0, 0.0, -0.24438434774703946,
                                -0.1508349724165829}, 1e-12);
  testing::expect_values(r[2], {-0.022714618939502367, 0.0927034119170883, -0.1072250787785537, 0.3068351127645689,
                                -0.12716168126280758, 0.26153693374165565, 0.25710137898086366,
                                -0.661075458423313}, 1e-12);
  testing::expect_values(r[3], {0.19094163231141306, 0.2474746184802002, -0.2182555064454126,
                                -0.22016074434620053}, 1e-12);
}

// F.cross_entropy(F.linear(x, W, b), torch.tensor([2, 0, 3]), reduction='none') (and .sum().backward())
TEST(LinearCrossEntropy, MatchesPyTorchNone) {
  const Small s;
  const TensorList r = loss_and_grads(true, s.x, s.w, s.b, labels({2, 0, 3}), {.reduction = Reduction::None, .chunk_rows = 2},
                                      ones({3}, {.dtype = kFloat64}));
  testing::expect_values(r[0], {0.626171564841935, 1.7961729609708086, 0.8854967749016888}, 1e-12);
  testing::expect_values(r[2], {-1.2965301795291573, -0.02310999977418221, -0.07509198134736117, 0.6368965882307621,
                                0.12449143551253163, 0.5862096671563358, 1.2471307253639872,
                                -1.1999962556129158}, 1e-12);
  testing::expect_values(r[3], {-0.4521840298106089, 0.5878546877668978, -0.18396781419872738,
                                0.0482971562424388}, 1e-12);
}

TEST(LinearCrossEntropy, GradcheckFloat64) {
  manual_seed(11);
  const Tensor x = random_tensor({5, 3}, kFloat64, true), w = random_tensor({4, 3}, kFloat64, true);
  const Tensor b = random_tensor({4}, kFloat64, true);
  const Tensor target = random_targets(5, 4, 3);
  const Tensor row_weights = random_tensor({5});
  for (Reduction r : {Reduction::Mean, Reduction::Sum, Reduction::None}) {
    for (int64_t chunk : {1, 2, 0}) {
      for (bool ahead : {true, false}) {
      SCOPED_TRACE("chunk " + std::to_string(chunk) + (ahead ? ", gradients in the forward" : ""));
      const LinearCrossEntropyOptions o{.reduction = r, .chunk_rows = chunk, .gradients_in_forward = ahead};
      testing::expect_gradcheck(
          [&](const TensorList& in) {
            const Tensor loss = linear_cross_entropy(in[0], in[1], in[2], target, o);
            return r == Reduction::None ? loss * row_weights : loss;
          },
          {x, w, b});
      testing::expect_gradcheck([&](const TensorList& in) { return linear_cross_entropy(in[0], in[1], Tensor(), target, o); },
                                {x, w});
      }
    }
  }
}

struct Case {
  int64_t n, v, d, chunk;
};

// Equal to cross_entropy(linear(...)) in value and gradients: N not a multiple of the chunk, one-row
// chunks, every reduction, ignored rows (ignore_index a valid class too), with and without bias.
TEST(LinearCrossEntropy, MatchesComposedPath) {
  manual_seed(3);
  const std::vector<Case> cases = {{1, 1, 1, 0}, {5, 3, 4, 2}, {7, 10, 3, 1}, {16, 10, 4, 5}, {9, 33, 8, 0},
                                   {6, 5, 2, 100}};
  for (DType dtype : {kFloat32, kFloat64}) {
    const double tol = dtype == kFloat32 ? 1e-5 : 1e-12;
    for (const Case& c : cases) {
      const Tensor x = random_tensor({c.n, c.d}, dtype, false, -2, 2), w = random_tensor({c.v, c.d}, dtype);
      const Tensor b = random_tensor({c.v}, dtype);
      const Tensor row_weights = random_tensor({c.n});
      for (Reduction r : {Reduction::Mean, Reduction::Sum, Reduction::None}) {
        for (int64_t ignore_index : {int64_t{-100}, int64_t{0}}) {
          for (int variant = 0; variant < 4; ++variant) {
            const bool bias = variant % 2 == 0, ahead = variant < 2;
            SCOPED_TRACE(::testing::Message() << dtype_name(dtype) << " n=" << c.n << " v=" << c.v << " d=" << c.d
                                              << " chunk=" << c.chunk << " reduction=" << static_cast<int>(r)
                                              << " ignore=" << ignore_index << " bias=" << bias << " ahead=" << ahead);
            const Tensor target = random_targets(c.n, c.v, c.n > 2 ? 3 : 0, ignore_index);
            const LinearCrossEntropyOptions o{.reduction = r, .ignore_index = ignore_index, .chunk_rows = c.chunk,
                                              .gradients_in_forward = ahead};
            const Tensor bb = bias ? b : Tensor();
            expect_all_close(loss_and_grads(true, x, w, bb, target, o, row_weights),
                             loss_and_grads(false, x, w, bb, target, o, row_weights), tol, tol);
          }
        }
      }
    }
  }
}

// Strided input, weight, bias and target read in place give the contiguous result.
TEST(LinearCrossEntropy, NonContiguousInputs) {
  manual_seed(5);
  const Tensor xt = random_tensor({4, 7}), wt = random_tensor({4, 6}), b2 = random_tensor({6, 2});
  const Tensor x = xt.t(), w = wt.t(), b = b2.select(1, 1);
  const Tensor t2 = labels({1, 5, 0, 2, 3, 4, 5, 1, 0, 2, 3, 4, 2, 1}).reshape({7, 2});
  const Tensor target = t2.select(1, 0);
  ASSERT_FALSE(x.is_contiguous());
  ASSERT_FALSE(target.is_contiguous());
  const LinearCrossEntropyOptions o{.chunk_rows = 3};
  expect_all_close(loss_and_grads(true, x, w, b, target, o),
                   loss_and_grads(true, x.contiguous(), w.contiguous(), b.contiguous(), target.contiguous(), o),
                   1e-12, 1e-12);
  expect_all_close(loss_and_grads(true, x, w, b, target, o), loss_and_grads(false, x, w, b, target, o), 1e-12, 1e-12);
}

// No rows: Mean is 0 / 0 = NaN and Sum 0, as in PyTorch; the gradients are zeros.
TEST(LinearCrossEntropy, ZeroRows) {
  const Tensor x = zeros({0, 3}, {.dtype = kFloat64}), w = random_tensor({4, 3}), b = random_tensor({4});
  const Tensor target = zeros({0}, {.dtype = kInt64});
  TensorList r = loss_and_grads(true, x, w, b, target, {});
  EXPECT_TRUE(std::isnan(r[0].item<double>()));
  r = loss_and_grads(true, x, w, b, target, {.reduction = Reduction::Sum});
  EXPECT_EQ(r[0].item<double>(), 0.0);
  EXPECT_EQ(r[1].sizes(), (Shape{0, 3}));
  testing::expect_values(r[2], std::vector<double>(12, 0.0));
  testing::expect_values(r[3], std::vector<double>(4, 0.0));
  // No features: the logits are the bias alone.
  const Tensor x0 = zeros({3, 0}, {.dtype = kFloat64}), w0 = zeros({4, 0}, {.dtype = kFloat64});
  expect_all_close(loss_and_grads(true, x0, w0, b, labels({1, 3, 0}), {.chunk_rows = 2}),
                   loss_and_grads(false, x0, w0, b, labels({1, 3, 0}), {}), 1e-12, 1e-12);
  // Every row ignored: Mean is NaN too.
  r = loss_and_grads(true, random_tensor({2, 3}), w, b, labels({-100, -100}), {});
  EXPECT_TRUE(std::isnan(r[0].item<double>()));
}

// Under bfloat16 autocast the products run in bfloat16 and the loss is float32; it stays within
// bfloat16 rounding of the float32 result, and of the composed path under the same autocast.
TEST(LinearCrossEntropy, AutocastBFloat16) {
  manual_seed(7);
  const Tensor x = random_tensor({37, 16}, kFloat32, false, -2, 2), w = random_tensor({50, 16}, kFloat32);
  const Tensor b = random_tensor({50}, kFloat32);
  const Tensor target = random_targets(37, 50, 5);
  const TensorList want = loss_and_grads(false, x, w, b, target, {});
  for (int64_t chunk : {0, 8, -8}) {  // -8: chunks of 8 with the recomputing backward
    TensorList got, composed;
    {
      AutocastGuard amp(kCPU, kBFloat16);
      got = loss_and_grads(true, x, w, b, target, {.chunk_rows = chunk < 0 ? -chunk : chunk,
                                                   .gradients_in_forward = chunk >= 0});
      composed = loss_and_grads(false, x, w, b, target, {});
    }
    EXPECT_EQ(got[0].dtype(), kFloat32);
    expect_all_close(got, want, 2e-2, 2e-2);
    expect_all_close(got, composed, 1e-2, 1e-2);
  }
}

// bfloat16 parameters without autocast: the loss comes back in bfloat16 (as the composed path's),
// the weight's gradient summed over chunks in float32.
TEST(LinearCrossEntropy, BFloat16Parameters) {
  manual_seed(8);
  const Tensor x = random_tensor({20, 8}, kBFloat16), w = random_tensor({30, 8}, kBFloat16);
  const Tensor target = random_targets(20, 30);
  const TensorList want = loss_and_grads(false, x.to(kFloat32), w.to(kFloat32), Tensor(), target, {});
  for (bool ahead : {true, false}) {
    SCOPED_TRACE(ahead ? "gradients in the forward" : "recomputing backward");
    const TensorList got = loss_and_grads(true, x, w, Tensor(), target, {.chunk_rows = 3, .gradients_in_forward = ahead});
    EXPECT_EQ(got[0].dtype(), kBFloat16);
    EXPECT_EQ(got[2].dtype(), kBFloat16);
    for (size_t i = 0; i < got.size(); ++i) expect_close(got[i].to(kFloat32), want[i], 2e-2, 2e-2);
  }
}

// A compiled function (aot_eager) gives the eager values and gradients.
TEST(LinearCrossEntropy, CompiledMatchesEager) {
  manual_seed(9);
  const Tensor x = random_tensor({11, 6}), w = random_tensor({9, 6}), b = random_tensor({9});
  const Tensor target = random_targets(11, 9, 4);
  auto fn = [](const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& t) {
    return linear_cross_entropy(x.tanh(), w, b, t, {.chunk_rows = 4}) * 2;
  };
  auto compiled = compile(fn, CompileOptions{.backend = "aot_eager"});
  for (int i = 0; i < 2; ++i) {
    const Tensor xe = x.detach().requires_grad_(true), we = w.detach().requires_grad_(true);
    const Tensor be = b.detach().requires_grad_(true);
    const Tensor xc = x.detach().requires_grad_(true), wc = w.detach().requires_grad_(true);
    const Tensor bc = b.detach().requires_grad_(true);
    fn(xe, we, be, target).backward();
    const Tensor lc = compiled(xc, wc, bc, target);
    lc.backward();
    expect_close(lc, fn(x, w, b, target), 1e-12, 1e-12);
    expect_close(xc.grad(), xe.grad(), 1e-12, 1e-12);
    expect_close(wc.grad(), we.grad(), 1e-12, 1e-12);
    expect_close(bc.grad(), be.grad(), 1e-12, 1e-12);
  }
  EXPECT_EQ(compiled.counters().compilations, 1);
}

// GPT's loss (through linear_cross_entropy) equals cross_entropy of its logits, gradients included.
TEST(LinearCrossEntropy, GptLossEqualsComposedLoss) {
  manual_seed(1);
  nn::GPT gpt(nn::GPTConfig{.vocab_size = 37, .context = 8, .d_model = 16, .heads = 2, .layers = 1},
              TensorOptions{.dtype = kFloat64});
  const Tensor idx = randint(0, 37, {2, 8});
  const Tensor targets = randint(0, 37, {2, 8});
  const TensorList fused = testing::loss_and_grads(gpt, gpt.loss(idx, targets));
  const TensorList composed =
      testing::loss_and_grads(gpt, cross_entropy(gpt.forward(idx).reshape({-1, 37}), targets.reshape({-1})));
  expect_all_close(fused, composed, 1e-10, 1e-12);
}

// Only the input requires a gradient (a frozen head): it matches the composed path's; a second
// derivative is refused with a clear error rather than computed wrong.
TEST(LinearCrossEntropy, FrozenWeightAndNoDoubleBackward) {
  manual_seed(12);
  const Tensor w = random_tensor({6, 3}), target = random_targets(5, 6, 2);
  const Tensor x1 = random_tensor({5, 3}, kFloat64, true), x2 = x1.detach().requires_grad_(true);
  linear_cross_entropy(x1, w, Tensor(), target, {.chunk_rows = 2}).backward();
  cross_entropy(linear(x2, w), target).backward();
  expect_close(x1.grad(), x2.grad(), 1e-12, 1e-12);
  EXPECT_FALSE(w.grad().defined());
  const Tensor x3 = random_tensor({5, 3}, kFloat64, true);
  const Tensor loss = linear_cross_entropy(x3, w, Tensor(), target, {.gradients_in_forward = false});
  const TensorList g = grad({loss}, {x3}, {}, true, true);
  EXPECT_THROW_MSG(g[0].sum().backward(), "[linear_cross_entropy_backward] is not differentiable");
  const Tensor ahead = linear_cross_entropy(x3, w, Tensor(), target);
  const TensorList g2 = grad({ahead}, {x3}, {}, true, true);
  expect_close(g2[0], g[0], 1e-12, 1e-12);
  EXPECT_THROW_MSG(g2[0].sum().backward(),
                   "[linear_cross_entropy_grads_ahead] cannot be differentiated twice: its gradients are computed in "
                   "the forward pass");
}

// With its gradients computed in the forward, the backward scales them by the loss's real
// gradient (a weighted loss, GradScaler's factor): the same as the recomputing backward's, Mean and
// Sum; without grad mode, or without an input that needs one, the plain forward runs.
TEST(LinearCrossEntropy, GradientsInForwardScaleWithTheLossGradient) {
  manual_seed(13);
  const Tensor x = random_tensor({9, 4}, kFloat64), w = random_tensor({7, 4}, kFloat64), b = random_tensor({7}, kFloat64);
  const Tensor target = random_targets(9, 7, 4);
  for (Reduction r : {Reduction::Mean, Reduction::Sum}) {
    TensorList by_mode[2];
    for (bool ahead : {true, false}) {
      const Tensor xr = x.detach().requires_grad_(true), wr = w.detach().requires_grad_(true);
      const Tensor br = b.detach().requires_grad_(true);
      const LinearCrossEntropyOptions o{.reduction = r, .chunk_rows = 2, .gradients_in_forward = ahead};
      (linear_cross_entropy(xr, wr, br, target, o) * -2.5).backward();
      by_mode[ahead ? 0 : 1] = {xr.grad(), wr.grad(), br.grad()};
    }
    expect_all_close(by_mode[0], by_mode[1], 1e-12, 1e-12);
  }
  const Tensor xr = x.detach().requires_grad_(true);
  Tensor plain;
  {
    NoGradGuard no_grad;
    plain = linear_cross_entropy(xr, w, b, target);
  }
  EXPECT_FALSE(plain.requires_grad());
  expect_close(plain, linear_cross_entropy(x, w, b, target), 1e-12, 1e-12);
  expect_close(plain, linear_cross_entropy(xr, w, b, target), 1e-12, 1e-12);
}

TEST(LinearCrossEntropy, Errors) {
  const Tensor x = zeros({3, 2}), w = zeros({4, 2}), b = zeros({4}), t = labels({0, 1, 2});
  EXPECT_THROW_MSG(linear_cross_entropy(zeros({3}), w, b, t), "[linear_cross_entropy] expected input of shape [N, D], got [3]");
  EXPECT_THROW_MSG(linear_cross_entropy(x, zeros({4, 3}), b, t),
                   "[linear_cross_entropy] input [3, 2] has 2 features but weight [4, 3] expects 3");
  EXPECT_THROW_MSG(linear_cross_entropy(x, zeros({4, 2}, {.dtype = kFloat64}), b, t),
                   "[linear_cross_entropy] expected weight of the input's dtype float32, got float64");
  EXPECT_THROW_MSG(linear_cross_entropy(x, w, zeros({5}), t),
                   "[linear_cross_entropy] expected bias of shape [4] (one per class), got [5]");
  EXPECT_THROW_MSG(linear_cross_entropy(x, w, b, t.to(kFloat32)),
                   "[linear_cross_entropy] expected target of dtype int64 (class indices), got float32");
  EXPECT_THROW_MSG(linear_cross_entropy(x, w, b, labels({0, 1})),
                   "[linear_cross_entropy] expected target of shape [3] for input [3, 2], got [2]");
  EXPECT_THROW_MSG(linear_cross_entropy(x.to(kInt64), w.to(kInt64), Tensor(), t),
                   "[linear_cross_entropy] expected a floating input, got int64");
  EXPECT_THROW_MSG(linear_cross_entropy(x, zeros({0, 2}), Tensor(), t),
                   "[linear_cross_entropy] expected at least one class");
  EXPECT_THROW_MSG(linear_cross_entropy(x, w, b, t, {.chunk_rows = -1}),
                   "[linear_cross_entropy] expected chunk_rows >= 0 (0 picks one), got -1");
  EXPECT_THROW_MSG(linear_cross_entropy(x, w, b, labels({0, 4, 1})),
                   "[linear_cross_entropy] target 4 is out of bounds: expected a class index in [0, 3] or "
                   "ignore_index -100 (at batch index 1)");
  EXPECT_THROW_MSG(linear_cross_entropy(x, w, b, labels({0, 1, -1}), {.chunk_rows = 2}),
                   "[linear_cross_entropy] target -1 is out of bounds: expected a class index in [0, 3] or "
                   "ignore_index -100 (at batch index 2)");
}

}  // namespace
}  // namespace tg
