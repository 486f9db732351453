// Convolutions, padding and the conv modules: values against a direct reference sum, gradients of
// every order, "same"/"valid" padding, modules' init and printing, clear errors, and on CUDA the
// cuDNN path in float32 and float64 and inside captured CUDA graphs.
#include <gtest/gtest.h>

#include <cmath>

#include "graphs/compile.h"
#include "ops/conv/conv_kernels.h"
#include "support/test_support.h"

namespace tg {
namespace {

using testing::expect_close;
using testing::random_tensor;

// The direct definition of a 2-D cross-correlation (float64 CPU), for checking the kernels.
Tensor reference_conv2d(const Tensor& x, const Tensor& w, const Tensor& b, int64_t sh, int64_t sw, int64_t ph,
                        int64_t pw, int64_t dh, int64_t dw, int64_t groups) {
  const int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
  const int64_t O = w.size(0), Cg = w.size(1), KH = w.size(2), KW = w.size(3), Og = O / groups;
  const int64_t Ho = (H + 2 * ph - dh * (KH - 1) - 1) / sh + 1, Wo = (W + 2 * pw - dw * (KW - 1) - 1) / sw + 1;
  const std::vector<double> xv = x.contiguous().to_vector<double>(), wv = w.contiguous().to_vector<double>();
  std::vector<double> out(static_cast<size_t>(N * O * Ho * Wo), 0.0);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < O; ++o)
      for (int64_t oh = 0; oh < Ho; ++oh)
        for (int64_t ow = 0; ow < Wo; ++ow) {
          double acc = b.defined() ? b[o].item<double>() : 0.0;
          const int64_t g = o / Og;
          for (int64_t c = 0; c < Cg; ++c)
            for (int64_t i = 0; i < KH; ++i)
              for (int64_t j = 0; j < KW; ++j) {
                const int64_t ih = oh * sh - ph + i * dh, iw = ow * sw - pw + j * dw;
                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                acc += xv[static_cast<size_t>(((n * C + g * Cg + c) * H + ih) * W + iw)] *
                       wv[static_cast<size_t>(((o * Cg + c) * KH + i) * KW + j)];
              }
          out[static_cast<size_t>(((n * O + o) * Ho + oh) * Wo + ow)] = acc;
        }
  return from_vector(out, {N, O, Ho, Wo}, {.dtype = kFloat64});
}

TEST(Conv2d, MatchesTheDirectSum) {
  manual_seed(1);
  Tensor x = random_tensor({2, 4, 9, 8}), w = random_tensor({6, 2, 3, 2}), b = random_tensor({6});
  expect_close(conv2d(x, w, b, {2, 1}, Shape{1, 2}, {2, 1}, 2), reference_conv2d(x, w, b, 2, 1, 1, 2, 2, 1, 2), 1e-12,
               1e-12);
  Tensor w1 = random_tensor({5, 4, 1, 1});
  expect_close(conv2d(x, w1), reference_conv2d(x, w1, Tensor(), 1, 1, 0, 0, 1, 1, 1), 1e-12, 1e-12);
  // float32 and a non-contiguous (transposed) input
  Tensor xt = random_tensor({2, 4, 8, 9}).transpose(2, 3);
  expect_close(conv2d(xt.to(kFloat32), w.to(kFloat32), b.to(kFloat32), {1}, 1, {1}, 2),
               reference_conv2d(xt, w, b, 1, 1, 1, 1, 1, 1, 2), 1e-5, 1e-5);
}

// The float32 CPU paths (oneDNN and im2col + GEMM) agree, gradients included, on awkward geometries.
TEST(Conv2d, OneDnnAndIm2colAgree) {
  if (!cpu_conv_onednn_available()) GTEST_SKIP() << "built without oneDNN";
  const bool before = cpu_conv_onednn();
  struct G {
    Shape x, w;
    Shape stride, dilation;
    int64_t pad, groups;
  };
  for (const G& g : {G{{2, 4, 9, 8}, {6, 2, 3, 2}, {2, 1}, {2, 1}, 1, 2}, G{{3, 3, 7, 7}, {5, 3, 1, 1}, {2}, {1}, 0, 1},
                     G{{1, 6, 10, 11}, {6, 1, 3, 3}, {3}, {1}, 2, 6}}) {
    Tensor x = random_tensor(g.x, kFloat32), w = random_tensor(g.w, kFloat32), b = random_tensor({g.w[0]}, kFloat32);
    auto run = [&](bool onednn) {
      set_cpu_conv_onednn(onednn);
      Tensor xl = x.detach().requires_grad_(true), wl = w.detach().requires_grad_(true);
      Tensor y = conv2d(xl, wl, b, g.stride, g.pad, g.dilation, g.groups);
      TensorList gr = grad({(y * y).sum()}, {xl, wl});
      return cat({y.flatten(), gr[0].flatten(), gr[1].flatten()});
    };
    expect_close(run(true), run(false), 1e-4, 1e-4);
  }
  set_cpu_conv_onednn(before);
}

TEST(Conv2d, SamePaddingKeepsTheSizeAndPadsTheExtraOnTheRight) {
  Tensor x = random_tensor({1, 2, 5, 6}), w = random_tensor({3, 2, 2, 4});
  Tensor y = conv2d(x, w, Tensor(), {1}, "same");
  EXPECT_EQ(y.sizes(), (Shape{1, 3, 5, 6}));
  // PyTorch pads total // 2 before and the rest after: height 0 + 1, width 1 + 2.
  expect_close(y, conv2d(pad(x, {1, 2, 0, 1}), w), 1e-12, 1e-12);
  EXPECT_EQ(conv2d(x, w, Tensor(), {1}, "valid").sizes(), (Shape{1, 3, 4, 3}));
  EXPECT_EQ(conv2d(x, w, Tensor(), {1}, "same", {2}).sizes(), (Shape{1, 3, 5, 6}));
}

TEST(Conv1d, IsConv2dOverAHeightOfOne) {
  Tensor x = random_tensor({2, 4, 11}), w = random_tensor({6, 2, 3}), b = random_tensor({6});
  Tensor y = conv1d(x, w, b, {2}, 1, {2}, 2);
  EXPECT_EQ(y.sizes(), (Shape{2, 6, 5}));
  expect_close(y, conv2d(x.unsqueeze(2), w.unsqueeze(2), b, {1, 2}, Shape{0, 1}, {1, 2}, 2).squeeze(2), 1e-12, 1e-12);
  EXPECT_EQ(conv1d(x.select(0, 0), w, b, {1}, "same", {1}, 2).sizes(), (Shape{6, 11}));
}

TEST(Conv2d, GradientsOfEveryOrder) {
  auto fn = [](const TensorList& in) { return conv2d(in[0], in[1], in[2], {2}, 1, {1}, 2); };
  TensorList in{random_tensor({2, 4, 5, 5}, kFloat64, true), random_tensor({4, 2, 3, 3}, kFloat64, true),
                random_tensor({4}, kFloat64, true)};
  testing::expect_gradcheck(fn, in);
  testing::expect_gradgradcheck(fn, in);
}

TEST(Conv2d, EmptyBatchGivesEmptyOutputAndZeroWeightGradient) {
  Tensor x = zeros({0, 3, 4, 4}, {.dtype = kFloat64}).requires_grad_(true);
  Tensor w = random_tensor({2, 3, 3, 3}, kFloat64, true);
  Tensor y = conv2d(x, w, Tensor(), {1}, 1);
  EXPECT_EQ(y.sizes(), (Shape{0, 2, 4, 4}));
  y.sum().backward();
  EXPECT_EQ(w.grad().abs().sum().item<double>(), 0.0);
}

TEST(Conv2d, RejectsBadInput) {
  Tensor w = ones({4, 3, 3, 3});
  EXPECT_THROW_MSG(conv2d(ones({2, 3}), w), "expected 3-D (unbatched) or 4-D (batched) input, got input of shape [2, 3]");
  EXPECT_THROW_MSG(conv2d(ones({1, 2, 5, 5}), w), "to have 3 channels");
  EXPECT_THROW_MSG(conv2d(ones({1, 3, 2, 2}), w), "smaller than the dilated kernel");
  EXPECT_THROW_MSG(conv2d(ones({1, 3, 5, 5}), w, ones({3})), "expected bias of shape [4]");
  EXPECT_THROW_MSG(conv2d(ones({1, 3, 5, 5}), w, Tensor(), {2}, "same"), "not supported for strided");
  EXPECT_THROW_MSG(conv2d(ones({1, 3, 5, 5}), w, Tensor(), {1}, "full"), "padding must be \"same\", \"valid\"");
  EXPECT_THROW_MSG(conv2d(ones({1, 3, 5, 5}), w, Tensor(), {0}), "expected positive stride");
  EXPECT_THROW_MSG(conv2d(ones({1, 3, 5, 5}), w, Tensor(), {1}, -1), "non-negative padding");
  EXPECT_THROW_MSG(conv2d(ones({1, 3, 5, 5}), ones({4, 1, 3, 3}), Tensor(), {1}, 0, {1}, 2), "to have 2 channels");
  EXPECT_THROW_MSG(conv2d(ones({1, 4, 5, 5}), ones({3, 2, 3, 3}), Tensor(), {1}, 0, {1}, 2), "divisible by groups");
  EXPECT_THROW_MSG(conv2d(ones({1, 3, 5, 5}), ones({4, 3, 3, 3}, {.dtype = kFloat64})), "same dtype");
  EXPECT_THROW_MSG(conv2d(ones({1, 3, 5, 5}, {.dtype = kInt64}), w), "float");
  EXPECT_THROW_MSG(conv1d(ones({1, 3, 5}), ones({4, 3, 3}), Tensor(), {1, 1}), "expected stride as one value");
}

TEST(Pad, ModesAndErrors) {
  Tensor x = arange(1.0, 5.0, 1.0, {.dtype = kFloat64}).reshape({1, 4});
  EXPECT_EQ(pad(x, {2, 1}, "reflect").to_vector<double>(), (std::vector<double>{3, 2, 1, 2, 3, 4, 3}));
  EXPECT_EQ(pad(x, {1, 2}, "replicate").to_vector<double>(), (std::vector<double>{1, 1, 2, 3, 4, 4, 4}));
  EXPECT_EQ(pad(x, {1, -2}, "constant", 9).to_vector<double>(), (std::vector<double>{9, 1, 2}));
  EXPECT_EQ(pad(x, {0, 0, 1, 0}).sizes(), (Shape{2, 4}));
  EXPECT_THROW_MSG(pad(x, {1}), "divisible by 2");
  EXPECT_THROW_MSG(pad(x, {4, 0}, "reflect"), "must be smaller than the padded dim");
  EXPECT_THROW_MSG(pad(x, {1, 1}, "wrap"), "mode must be");
  EXPECT_THROW_MSG(pad(x, {1, 1, 1, 1, 1, 1}), "too large");
}

TEST(Unflatten, InvertsFlattenAsAView) {
  Tensor x = random_tensor({2, 12});
  Tensor y = unflatten(x, 1, {3, -1});
  EXPECT_EQ(y.sizes(), (Shape{2, 3, 4}));
  EXPECT_EQ(y.data_ptr<double>(), x.data_ptr<double>());
  expect_close(flatten(y, 1), x);
  EXPECT_THROW_MSG(unflatten(x, 1, {5, 2}), "don't multiply up to the size of dim 1 (12)");
  EXPECT_THROW_MSG(unflatten(x, 1, {-1, -1}), "only one dimension can be inferred");
}

TEST(ConvModules, InitShapesAndPrinting) {
  manual_seed(0);
  nn::Conv2d conv(4, 8, {3}, {2}, 1, {1}, 2);
  EXPECT_EQ(conv.weight().sizes(), (Shape{8, 2, 3, 3}));
  const double bound = 1.0 / std::sqrt(2.0 * 9.0);  // kaiming_uniform(a=sqrt(5)) and the bias share it
  EXPECT_LE(conv.weight().abs().amax().item<double>(), bound);
  EXPECT_LE(conv.bias().abs().amax().item<double>(), bound);
  EXPECT_GT(conv.weight().abs().amax().item<double>(), 0.8 * bound);
  EXPECT_EQ(conv.extra_repr(), "4, 8, kernel_size=(3, 3), stride=(2, 2), padding=(1, 1), groups=2");
  EXPECT_EQ(conv(randn({3, 4, 9, 9})).sizes(), (Shape{3, 8, 5, 5}));
  EXPECT_EQ(conv.parameters().size(), 2u);
  nn::Conv2d same(16, 16, {1}, {1}, "same", {1}, 1, true);
  EXPECT_EQ(same.extra_repr(), "16, 16, kernel_size=(1, 1), stride=(1, 1), padding=same");
  nn::Conv1d c1(3, 5, 4, 1, 0, 1, 1, false);
  EXPECT_FALSE(c1.bias().defined());
  EXPECT_EQ(c1(randn({2, 3, 10})).sizes(), (Shape{2, 5, 7}));
  EXPECT_EQ(c1.extra_repr(), "3, 5, kernel_size=(4,), stride=(1,), padding=(0,), bias=False");
  nn::Flatten flat;
  EXPECT_EQ(flat(randn({2, 3, 4})).sizes(), (Shape{2, 12}));
  nn::Unflatten unflat(1, {1, 8, -1});
  EXPECT_EQ(unflat(randn({2, 64})).sizes(), (Shape{2, 1, 8, 8}));
  EXPECT_EQ(unflat.extra_repr(), "dim=1, unflattened_size=(1, 8, -1)");
  EXPECT_THROW_MSG(nn::Conv2d(3, 4, {3}, {1}, 0, {1}, 2), "in_channels (3) must be divisible by groups (2)");
  EXPECT_THROW_MSG(nn::Conv2d(3, 4, {3, 3, 3}), "kernel_size as one or two values");
}

TEST(ConvCompiled, AotMatchesEager) {
  manual_seed(2);
  auto conv = std::make_shared<nn::Conv2d>(3, 4, Shape{3}, Shape{1}, ConvPadding(1));
  auto fn = [conv](const Tensor& x) { return conv->forward(x).relu().sum(); };
  auto compiled = compile(fn, CompileOptions{.backend = "aot_eager"});
  Tensor x = randn({2, 3, 6, 6});
  Tensor xe = x.detach().requires_grad_(true), xc = x.detach().clone().requires_grad_(true);
  Tensor le = fn(xe);
  le.backward();
  const Tensor gw = conv->weight().grad().clone();
  conv->zero_grad();
  Tensor lc = compiled(xc);
  lc.backward();
  expect_close(lc, le, 1e-5, 1e-5);
  expect_close(xc.grad(), xe.grad(), 1e-5, 1e-5);
  expect_close(conv->weight().grad(), gw, 1e-5, 1e-5);
}

TEST(ConvCuda, CudnnMatchesCpuInFloat32AndFloat64) {
  TG_REQUIRE_CUDA();
  for (DType dt : {kFloat32, kFloat64}) {
    Tensor x = random_tensor({3, 4, 10, 9}, dt), w = random_tensor({6, 2, 3, 3}, dt), b = random_tensor({6}, dt);
    auto fwd = [](const TensorList& in) { return conv2d(in[0], in[1], in[2], {2, 1}, Shape{1, 1}, {1, 2}, 2); };
    testing::expect_cuda_matches_cpu(fwd, {x, w, b}, 1e-4, 1e-5);
    // gradients of input, weight and bias through cuDNN's backward data and filter
    auto grads = [&](const TensorList& in) {
      TensorList leaves;
      for (const Tensor& t : in) leaves.push_back(t.detach().requires_grad_(true));
      Tensor y = fwd(leaves);
      TensorList g = grad({(y * y).sum()}, leaves);
      return cat({g[0].flatten(), g[1].flatten(), g[2].flatten()});
    };
    testing::expect_cuda_matches_cpu(grads, {x, w, b}, 1e-4, 1e-4);
  }
}

// Grouped, strided and "valid"-padded convolutions under bfloat16 autocast on CUDA (the 16-bit
// backward of input [3, 6, 3, 8], weight [6, 2, 3, 1], 3 groups, stride 2 was refused by cuDNN's
// first choice): output and gradients within bfloat16 rounding of the float32 CPU result.
TEST(ConvCuda, GroupedStridedConvolutionsUnderAutocast) {
  TG_REQUIRE_CUDA();
  struct Case {
    Shape x, w;
    int64_t groups;
    Shape stride;
    ConvPadding padding;
  };
  manual_seed(5);
  for (const Case& c : std::vector<Case>{{{3, 6, 3, 8}, {6, 2, 3, 1}, 3, {2}, "valid"},
                                         {{2, 4, 7, 7}, {8, 1, 3, 3}, 4, {2, 1}, "valid"},
                                         {{2, 6, 9, 5}, {6, 3, 2, 2}, 2, {1}, "same"},
                                         {{1, 8, 6, 6}, {4, 4, 3, 3}, 2, {3}, 1}}) {
    SCOPED_TRACE(::testing::Message() << "x " << shape_str(c.x) << ", w " << shape_str(c.w) << ", groups " << c.groups);
    const Tensor x = random_tensor(c.x, kFloat32), w = random_tensor(c.w, kFloat32);
    const Tensor b = random_tensor({c.w[0]}, kFloat32);
    auto run = [&](Device device, bool autocast) {
      // detach(): to() of a tensor already on `device` is the tensor itself, and each run wants leaves.
      const Tensor xd = x.to(device).detach().requires_grad_(true), wd = w.to(device).detach().requires_grad_(true);
      const Tensor bd = b.to(device).detach().requires_grad_(true);
      Tensor y;
      {
        AutocastGuard guard(device, kBFloat16, autocast);
        y = conv2d(xd, wd, bd, c.stride, c.padding, {1}, c.groups);
      }
      (y.to(kFloat32) * y.to(kFloat32)).sum().backward();
      return TensorList{y.to(kFloat32).cpu(), xd.grad().cpu(), wd.grad().cpu(), bd.grad().cpu()};
    };
    const TensorList want = run(kCPU, false), got = run(cuda_device(0), true);
    for (size_t i = 0; i < want.size(); ++i) expect_close(got[i], want[i], 5e-2, 5e-2);
  }
}

TEST(ConvCuda, GradcheckOnTheGpuInFloat64) {
  TG_REQUIRE_CUDA();
  Tensor x = random_tensor({2, 2, 5, 5}), w = random_tensor({3, 2, 3, 3}), b = random_tensor({3});
  auto fn = [](const TensorList& in) {
    TensorList cuda_in;
    for (const Tensor& t : in) cuda_in.push_back(t.to(cuda_device(0)));
    return conv2d(cuda_in[0], cuda_in[1], cuda_in[2], {1}, 1).to(kCPU);
  };
  testing::expect_gradcheck(fn, {x.requires_grad_(true), w.requires_grad_(true), b.requires_grad_(true)});
}

TEST(ConvCuda, CapturedInCudaGraphs) {
  TG_REQUIRE_CUDA();
  manual_seed(4);
  auto conv = std::make_shared<nn::Conv2d>(3, 8, Shape{3}, Shape{2}, ConvPadding(1), Shape{1}, 1, true,
                                           TensorOptions{.device = cuda_device(0)});
  auto fn = [conv](const Tensor& x) { return conv->forward(x).relu().sum(); };
  auto compiled = compile(fn, CompileOptions{.backend = "cudagraphs"});
  Tensor x = randn({4, 3, 16, 16}, {.device = cuda_device(0)});
  for (int i = 0; i < 4; ++i) {
    Tensor xe = x.detach().requires_grad_(true), xc = x.detach().clone().requires_grad_(true);
    Tensor le = fn(xe);
    le.backward();
    const Tensor gw = conv->weight().grad().clone();
    conv->zero_grad();
    Tensor lc = compiled(xc);
    lc.backward();
    expect_close(lc, le, 1e-4, 1e-4);
    expect_close(xc.grad(), xe.grad(), 1e-4, 1e-5);
    expect_close(conv->weight().grad(), gw, 1e-4, 1e-4);
    conv->zero_grad();
  }
  EXPECT_GT(compiled.counters().graphs_captured, 0);
  EXPECT_GT(compiled.counters().replays, 0);
  EXPECT_TRUE(compiled.counters().cudagraph_skips.empty());
}

}  // namespace
}  // namespace tg
