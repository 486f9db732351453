// cross_entropy and nll_loss with PyTorch's keyword arguments: ignore_index, class weights,
// label_smoothing, reductions, [N, C, d1, ...] inputs and class-probability targets. Values against
// PyTorch's (literals), first and second derivatives, errors, and CPU-vs-CUDA agreement.
#include <cmath>
#include <vector>

#include "support/test_support.h"
#include "support/values.h"
#include "tensor/cuda_runtime.h"

namespace tg {
namespace {

using testing::expect_close;
using testing::expect_cuda_matches_cpu;
using testing::expect_gradcheck;
using testing::expect_gradgradcheck;
using testing::expect_values;
using testing::kNaN;
using testing::make;
using testing::random_tensor;
using L = const TensorList&;

Tensor labels(std::vector<int64_t> v, Shape s = {}) {
  if (s.empty()) s = {static_cast<int64_t>(v.size())};
  return from_vector(v, s);
}

// X, T and W of the PyTorch reference script:
// X = torch.tensor([[1.0, -0.5, 2.0, 0.3], [0.1, 0.2, -1.0, 1.5], [-2.0, 0.7, 0.4, 0.0],
//                   [0.9, -1.1, 0.6, 0.25], [0.0, 0.5, -0.5, 1.0]], dtype=torch.float64)
// T = torch.tensor([2, -100, 0, 3, 1]); W = torch.tensor([0.5, 2.0, 1.0, 1.5], dtype=torch.float64)
Tensor logits() {
  return make({1.0, -0.5, 2.0, 0.3, 0.1, 0.2, -1.0, 1.5, -2.0, 0.7, 0.4, 0.0, 0.9, -1.1, 0.6, 0.25, 0.0, 0.5, -0.5, 1.0},
              kFloat64, {5, 4});
}
Tensor targets() { return labels({2, -100, 0, 3, 1}); }
Tensor class_weights() { return make({0.5, 2.0, 1.0, 1.5}); }

CrossEntropyOptions ce(Reduction r, bool weighted, double smoothing) {
  return {.weight = weighted ? class_weights() : Tensor(), .reduction = r, .label_smoothing = smoothing};
}

TEST(CrossEntropyOptions, IgnoreIndexWeightsAndSmoothingMatchPyTorch) {
  const Tensor x = logits(), t = targets();
  // F.cross_entropy(X, T, reduction=...) with no options, weight=W, label_smoothing=0.2, and both
  expect_values(cross_entropy(x, t), {1.70929277228}, 1e-10);
  expect_values(cross_entropy(x, t, ce(Reduction::Mean, true, 0)), {1.42388266307}, 1e-10);
  expect_values(cross_entropy(x, t, ce(Reduction::Mean, false, 0.2)), {1.70241777228}, 1e-10);
  expect_values(cross_entropy(x, t, ce(Reduction::Mean, true, 0.2)), {1.47871468491}, 1e-10);
  expect_values(cross_entropy(x, t, Reduction::Sum), {6.83717108911}, 1e-10);
  expect_values(cross_entropy(x, t, ce(Reduction::Sum, true, 0)), {7.11941331533}, 1e-10);
  expect_values(cross_entropy(x, t, ce(Reduction::Sum, false, 0.2)), {6.80967108911}, 1e-10);
  expect_values(cross_entropy(x, t, ce(Reduction::Sum, true, 0.2)), {7.39357342454}, 1e-10);
  expect_values(cross_entropy(x, t, Reduction::None), {0.490203214415, 0, 3.53491104697, 1.52471815602, 1.2873386717},
                1e-10);
  expect_values(cross_entropy(x, t, ce(Reduction::None, true, 0)),
                {0.490203214415, 0, 1.76745552349, 2.28707723403, 2.5746773434}, 1e-10);
  expect_values(cross_entropy(x, t, ce(Reduction::None, false, 0.2)),
                {0.750203214415, 0, 3.17991104697, 1.54221815602, 1.3373386717}, 1e-10);
  expect_values(cross_entropy(x, t, ce(Reduction::None, true, 0.2)),
                {0.917213375136, 0, 1.75769218053, 2.31209132623, 2.40657654264}, 1e-10);
}

TEST(CrossEntropyOptions, ACustomIgnoreIndex) {
  const Tensor x = logits(), t = labels({2, 3, 0, 3, 1});
  // F.cross_entropy(X, [2, 3, 0, 3, 1], ignore_index=3, weight=W, label_smoothing=0.1, reduction=...)
  CrossEntropyOptions o{.weight = class_weights(), .ignore_index = 3, .label_smoothing = 0.1};
  expect_values(cross_entropy(x, t, o), {1.41625973994}, 1e-10);
  o.reduction = Reduction::Sum;
  expect_values(cross_entropy(x, t, o), {4.9569090898}, 1e-10);
  o.reduction = Reduction::None;
  expect_values(cross_entropy(x, t, o), {0.703708294776, 0, 1.76257385201, 0, 2.49062694302}, 1e-10);
  // Fused path (no weights, no smoothing) with the same ignore_index.
  const Tensor fused = cross_entropy(x, t, CrossEntropyOptions{.ignore_index = 3});
  const Tensor composed = cross_entropy(x, t, CrossEntropyOptions{.weight = ones({4}, {.dtype = kFloat64}),
                                                                  .ignore_index = 3});
  expect_close(fused, composed, 1e-12, 1e-12);
}

TEST(CrossEntropyOptions, GradientsMatchPyTorch) {
  Tensor x = logits();
  x.requires_grad_(true);
  // torch.autograd.grad(F.cross_entropy(X, T, weight=W, label_smoothing=0.2), X)
  cross_entropy(x, targets(), ce(Reduction::Mean, true, 0.2)).backward();
  expect_values(x.grad(), {0.0423186408562, -0.00944178408774, -0.0413745984131, 0.00849774164459, 0, 0, 0, 0,
                           -0.0812090243876, 0.0364087000879, 0.0317885928301, 0.0130117314696, 0.115924062623,
                           -0.00363470773476, 0.0795827489102, -0.191872103799, 0.056939885993, -0.237878392459,
                           0.0275684399139, 0.153370066552},
                1e-9);
  Tensor y = logits();
  y.requires_grad_(true);
  // torch.autograd.grad(F.cross_entropy(X, T), X): the fused path, row 1 ignored
  cross_entropy(y, targets()).backward();
  expect_values(y.grad(), {0.0563317153051, 0.0125693046575, -0.0968745219204, 0.0279735019578, 0, 0, 0, 0,
                           -0.242709662284, 0.1084782694, 0.0803626785194, 0.0538687143647, 0.104244881572,
                           0.0141080105735, 0.0772265076812, -0.195579399826, 0.0418512743196, -0.180998913823,
                           0.0253840810229, 0.113763558481},
                1e-9);
}

TEST(CrossEntropyOptions, FirstAndSecondDerivatives) {
  const Tensor x = random_tensor({5, 4}, kFloat64, true, -2, 2);
  const Tensor t = targets();
  for (Reduction r : {Reduction::Mean, Reduction::Sum, Reduction::None}) {
    for (bool weighted : {false, true})
      for (double smoothing : {0.0, 0.3}) {
        const CrossEntropyOptions o = ce(r, weighted, smoothing);
        expect_gradcheck([t, o](L v) { return cross_entropy(v[0], t, o); }, {x});
        expect_gradgradcheck([t, o](L v) { return cross_entropy(v[0], t, o); }, {x});
      }
    expect_gradcheck([t, r](L v) { return nll_loss(v[0], t, NllLossOptions{.weight = class_weights(), .reduction = r}); },
                     {x});
    // The fused ops with an ignored row, to the second order.
    expect_gradgradcheck([t, r](L v) { return nll_loss(mul(v[0], v[0]), t, r); }, {x});
  }
  // [N, C, d] inputs and probability targets.
  const Tensor x3 = random_tensor({2, 3, 4}, kFloat64, true, -2, 2);
  const Tensor t3 = labels({0, 2, -100, 1, 1, 1, 0, 2}, {2, 4});
  expect_gradcheck([t3](L v) { return cross_entropy(v[0], t3); }, {x3});
  expect_gradgradcheck([t3](L v) { return cross_entropy(v[0], t3, ce(Reduction::Mean, false, 0.1)); }, {x3});
  const Tensor p = softmax(random_tensor({5, 4}, kFloat64), 1);
  expect_gradcheck([p](L v) { return cross_entropy(v[0], p, ce(Reduction::Mean, true, 0.25)); }, {x});
}

TEST(NllLossOptions, WeightsAndIgnoreIndexMatchPyTorch) {
  const Tensor x = logits(), t = targets();
  // F.nll_loss(X, T, weight=W, reduction=...) and F.nll_loss(X, T, reduction=...)
  expect_values(nll_loss(x, t, NllLossOptions{.weight = class_weights()}), {-0.475}, 1e-12);
  expect_values(nll_loss(x, t), {-0.1875}, 1e-12);
  expect_values(nll_loss(x, t, NllLossOptions{.weight = class_weights(), .reduction = Reduction::Sum}), {-2.375}, 1e-12);
  expect_values(nll_loss(x, t, Reduction::Sum), {-0.75}, 1e-12);
  expect_values(nll_loss(x, t, NllLossOptions{.weight = class_weights(), .reduction = Reduction::None}),
                {-2, 0, 1, -0.375, -1}, 1e-12);
  expect_values(nll_loss(x, t, Reduction::None), {-2, 0, 2, -0.25, -0.5}, 1e-12);
}

TEST(CrossEntropyOptions, SpatialInputs) {
  // X3 = torch.arange(24, dtype=torch.float64).reshape(2, 3, 4).sin()
  // T3 = torch.tensor([[0, 2, -100, 1], [1, 1, 0, 2]]); W3 = torch.tensor([1.0, 0.5, 3.0], dtype=torch.float64)
  const Tensor x = sin(arange(0, 24, 1, {.dtype = kFloat64}).reshape({2, 3, 4}));
  const Tensor t = labels({0, 2, -100, 1, 1, 1, 0, 2}, {2, 4});
  const CrossEntropyOptions smoothed{.weight = make({1.0, 0.5, 3.0}), .label_smoothing = 0.3};
  // F.cross_entropy(X3, T3, reduction=...) and F.cross_entropy(X3, T3, weight=W3, label_smoothing=0.3, reduction=...)
  expect_values(cross_entropy(x, t), {1.37092486847}, 1e-10);
  expect_values(cross_entropy(x, t, smoothed), {1.39894428849}, 1e-10);
  expect_values(cross_entropy(x, t, Reduction::Sum), {9.59647407932}, 1e-10);
  CrossEntropyOptions o = smoothed;
  o.reduction = Reduction::Sum;
  expect_values(cross_entropy(x, t, o), {13.2899707407}, 1e-10);
  const Tensor none = cross_entropy(x, t, Reduction::None);
  EXPECT_EQ(none.sizes(), (Shape{2, 4}));
  expect_values(none, {1.42519581742, 1.02607908471, 0, 0.580928595077, 1.62978412716, 2.3996216354, 0.433935538024,
                       2.10092928153},
                1e-10);
  o.reduction = Reduction::None;
  expect_values(cross_entropy(x, t, o), {1.38000784081, 2.64211855405, 0, 1.01342257671, 0.968439691642,
                                         1.24212491632, 0.885943198347, 5.15791396278},
                1e-10);
  // nll_loss of [N, C, d] log-probabilities agrees with cross_entropy.
  expect_close(nll_loss(log_softmax(x, 1), t), cross_entropy(x, t), 1e-12, 1e-12);
}

TEST(CrossEntropyOptions, ProbabilityTargets) {
  const Tensor x = logits();
  // P = torch.softmax(torch.tensor([[0.3, 0.1, -0.2, 1.0], [1.0, 0.0, 0.5, -0.5], [0.0, 0.0, 0.0, 2.0],
  //                                 [0.2, 0.4, 0.6, 0.8], [1.0, 1.0, -1.0, 0.0]], dtype=torch.float64), 1)
  const Tensor p = softmax(make({0.3, 0.1, -0.2, 1.0, 1.0, 0.0, 0.5, -0.5, 0.0, 0.0, 0.0, 2.0, 0.2, 0.4, 0.6, 0.8, 1.0,
                                 1.0, -1.0, 0.0},
                                kFloat64, {5, 4}),
                           1);
  const CrossEntropyOptions o{.weight = class_weights(), .label_smoothing = 0.25};
  // F.cross_entropy(X, P, reduction=...) and F.cross_entropy(X, P, weight=W, label_smoothing=0.25, reduction=...)
  expect_values(cross_entropy(x, p), {1.73266179914}, 1e-10);
  expect_values(cross_entropy(x, p, o), {2.16381918916}, 1e-10);
  expect_values(cross_entropy(x, p, Reduction::Sum), {8.66330899571}, 1e-10);
  expect_values(cross_entropy(x, p, Reduction::None),
                {1.94778057509, 2.01547535463, 1.6215406687, 1.61084738033, 1.46766501696}, 1e-10);
  CrossEntropyOptions none = o;
  none.reduction = Reduction::None;
  expect_values(cross_entropy(x, p, none), {2.77748703843, 1.9422335388, 1.98787424604, 2.41586883329, 1.69563228926},
                1e-10);
  // P3 = torch.softmax(X3.cos(), 1); F.cross_entropy(X3, P3, weight=W3, label_smoothing=0.1)
  const Tensor x3 = sin(arange(0, 24, 1, {.dtype = kFloat64}).reshape({2, 3, 4}));
  const Tensor p3 = softmax(cos(x3), 1);
  expect_values(cross_entropy(x3, p3, CrossEntropyOptions{.weight = make({1.0, 0.5, 3.0}), .label_smoothing = 0.1}),
                {1.85206955185}, 1e-10);
}

TEST(CrossEntropyOptions, AllIgnoredAveragesToNaN) {
  const Tensor t = labels({-100, -100, -100, -100, -100});
  // F.cross_entropy(X, full((5,), -100)) is nan, with or without weights and smoothing
  expect_values(cross_entropy(logits(), t), {kNaN});
  expect_values(cross_entropy(logits(), t, ce(Reduction::Mean, true, 0.1)), {kNaN});
  expect_values(cross_entropy(logits(), t, Reduction::Sum), {0});
  Tensor x = logits();
  x.requires_grad_(true);
  cross_entropy(x, t).backward();
  expect_values(x.grad(), std::vector<double>(20, 0.0));
}

TEST(CrossEntropyOptions, Float32AndUnbatchedInputs) {
  const Tensor x = logits().to(kFloat32), t = targets();
  expect_close(cross_entropy(x, t, ce(Reduction::Mean, true, 0.2)),
               cross_entropy(logits(), t, ce(Reduction::Mean, true, 0.2)).to(kFloat32), 1e-6, 1e-6);
  // A [C] input with a 0-dim target is one row.
  const Tensor row = logits().select(0, 3);
  const Tensor one = scalar_tensor(3, {.dtype = kInt64});
  const Tensor got = cross_entropy(row, one, ce(Reduction::None, true, 0.2));
  EXPECT_EQ(got.dim(), 0);
  expect_values(got, {2.31209132623}, 1e-10);
  expect_values(cross_entropy(row, one), {1.52471815602}, 1e-10);
}

TEST(CrossEntropyOptions, Errors) {
  const Tensor x = logits(), t = targets();
  EXPECT_THROW_MSG(cross_entropy(x, t, CrossEntropyOptions{.label_smoothing = 1.5}),
                   "[cross_entropy] label_smoothing must be between 0.0 and 1.0. Got: 1.5");
  EXPECT_THROW_MSG(cross_entropy(x, t, CrossEntropyOptions{.weight = ones({3}, {.dtype = kFloat64})}),
                   "weight tensor should be defined either for all 4 classes or no classes but got weight tensor of "
                   "shape: [3]");
  EXPECT_THROW_MSG(nll_loss(x, t, NllLossOptions{.weight = ones({2, 2}, {.dtype = kFloat64})}),
                   "[nll_loss] weight tensor should be defined either for all 4 classes");
  EXPECT_THROW_MSG(cross_entropy(x, softmax(x, 1), CrossEntropyOptions{.ignore_index = 1}),
                   "[cross_entropy] ignore_index is not supported for class-probability targets");
  EXPECT_THROW_MSG(cross_entropy(x, zeros({5, 4}, {.dtype = kInt64})),
                   "[cross_entropy] expected a floating target of class probabilities");
  EXPECT_THROW_MSG(cross_entropy(zeros({2, 3, 4}), labels({0, 1})),
                   "[cross_entropy] expected target of shape [2, 4] for input [2, 3, 4], got [2]");
  EXPECT_THROW_MSG(nll_loss(zeros({2, 3, 4}), labels({0, 1})),
                   "[nll_loss] expected target of shape [2, 4] for input [2, 3, 4], got [2]");
  // With ignore_index 3, a -100 target is a bad class again.
  EXPECT_THROW_MSG(cross_entropy(x, t, CrossEntropyOptions{.ignore_index = 3}), "target -100 is out of bounds");
  EXPECT_THROW_MSG(cross_entropy(x, labels({0, 1, 7, 0, 0})), "target 7 is out of bounds");
}

// n class indices cycling over 0, 1, 2 and the ignored -100.
Tensor remainder_labels(int64_t n) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = i % 4 == 3 ? -100 : i % 4;
  return labels(v);
}

TEST(LossOptionsCuda, MatchCpuForwardAndBackward) {
  TG_REQUIRE_CUDA();
  const Tensor t = labels({2, -100, 0, 3, 1});
  const Tensor t3 = labels({0, 2, -100, 1, 1, 1, 0, 2}, {2, 4});
  for (DType d : {kFloat32, kFloat64}) {
    const Tensor x = random_tensor({5, 4}, d, false, -3, 3);
    const Tensor x3 = random_tensor({2, 3, 4}, d, false, -3, 3);
    const Tensor w = random_tensor({4}, d, false, 0.5, 2);
    for (Reduction r : {Reduction::Mean, Reduction::Sum, Reduction::None}) {
      auto loss_and_grad = [r](const Tensor& in, const Tensor& target, const CrossEntropyOptions& base) {
        CrossEntropyOptions o = base;
        o.reduction = r;
        Tensor leaf = in.detach().requires_grad_(true);
        const Tensor l = cross_entropy(leaf, target, o);
        sum(l).backward();
        return cat({l.flatten(), leaf.grad().flatten()}, 0);
      };
      expect_cuda_matches_cpu([&](L v) { return loss_and_grad(v[0], v[1], {}); }, {x, t}, 1e-5, 1e-6);
      expect_cuda_matches_cpu([&](L v) { return loss_and_grad(v[0], v[1], {.weight = v[2], .label_smoothing = 0.2}); },
                              {x, t, w}, 1e-5, 1e-6);
      expect_cuda_matches_cpu([&](L v) { return loss_and_grad(v[0], v[1], {.label_smoothing = 0.1}); }, {x3, t3}, 1e-5,
                              1e-6);
      expect_cuda_matches_cpu([&](L v) { return loss_and_grad(v[0], v[1], {}); }, {x3, t3}, 1e-5, 1e-6);
      expect_cuda_matches_cpu([r](L v) { return nll_loss(v[0], v[1], NllLossOptions{.ignore_index = 0, .reduction = r}); },
                              {x, labels({2, 0, 0, 3, 1})});
    }
  }
  // A large batch (the CUDA nll path that writes per-sample terms first), a third of it ignored.
  const Tensor big = random_tensor({70000, 3}, kFloat32, false, -2, 2);
  const Tensor bt = remainder_labels(70000);
  expect_cuda_matches_cpu([](L v) { return nll_loss(v[0], v[1]); }, {big, bt}, 1e-4, 1e-5);
  expect_cuda_matches_cpu([](L v) { return cross_entropy(v[0], v[1]); }, {big, bt}, 1e-4, 1e-5);
}

}  // namespace
}  // namespace tg
