// Padding modes (F.pad and the conv layers' padding_mode), conv3d and the transposed convolutions:
// values, gradients and module behaviour against PyTorch 1.13 (float64, fixed inputs), gradient
// checks, errors, and CUDA against the CPU.
#include <gtest/gtest.h>

#include <cmath>

#include "graphs/compile.h"
#include "ops/conv/conv_kernels.h"
#include "support/test_support.h"

namespace tg {
namespace {

using testing::expect_close;

// sin(arange(n) * f) in the given shape (float64): the fixed inputs of the PyTorch references.
Tensor wave(const Shape& shape, double f) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return sin(mul(arange(n, {.dtype = kFloat64}), f)).reshape(shape);
}

// sum(t * wave(t.shape, f)): the loss of the references and a checksum of their results.
Tensor weighted(const Tensor& t, double f) { return (t * wave(t.sizes(), f)).sum(); }
double checksum(const Tensor& t, double f) { return weighted(t, f).item<double>(); }

Tensor f64(const std::vector<double>& v) {
  return from_vector(v, {static_cast<int64_t>(v.size())}, {.dtype = kFloat64});
}

// A PyTorch reference: output shape, checksum (f = 0.3), first values, and the checksums (f = 0.5) of
// the inputs' gradients of the loss weighted(y, 0.3).
struct Reference {
  Shape shape;
  double sum;
  std::vector<double> first;
  std::vector<double> grads;
};

// Runs fn on inputs wave(shapes[i], 0.7 + 0.6 * i) and compares with the reference.
void expect_matches(const Reference& ref, const std::vector<Shape>& shapes, const testing::TensorFn& fn) {
  TensorList in;
  for (size_t i = 0; i < shapes.size(); ++i) in.push_back(wave(shapes[i], 0.7 + 0.6 * static_cast<double>(i)).requires_grad_(true));
  Tensor y = fn(in);
  ASSERT_EQ(y.sizes(), ref.shape);
  EXPECT_NEAR(checksum(y.detach(), 0.3), ref.sum, 1e-10);
  expect_close(y.detach().flatten().slice(0, 0, static_cast<int64_t>(ref.first.size())), f64(ref.first), 1e-12, 1e-12);
  TensorList g = grad({weighted(y, 0.3)}, in);
  ASSERT_EQ(g.size(), ref.grads.size());
  for (size_t i = 0; i < g.size(); ++i) EXPECT_NEAR(checksum(g[i], 0.5), ref.grads[i], 1e-10) << "gradient " << i;
}

TEST(PadModes, CircularMatchesPyTorch) {
  // F.pad(x, (2, 1, 1, 3), mode="circular"), x = sin(arange(24) * 0.7).reshape(1, 2, 3, 4)
  Tensor y = pad(wave({1, 2, 3, 4}, 0.7), {2, 1, 1, 3}, "circular");
  ASSERT_EQ(y.sizes(), (Shape{1, 2, 7, 7}));
  EXPECT_NEAR(checksum(y, 0.3), 9.0026347670355769, 1e-12);
  expect_close(y.flatten().slice(0, 0, 16),
               f64({0.65698659871878906, 0.98816823387700026, -0.63126663787232162, 0.016813900484349713,
                    0.65698659871878906, 0.98816823387700026, -0.63126663787232162, 0.98544972998846014,
                    0.86320936664887393, 0, 0.64421768723769102, 0.98544972998846014, 0.86320936664887393, 0,
                    -0.87157577241358775, -0.98245261262433259}),
               1e-14, 1e-14);
  Tensor x = arange(1.0, 5.0, 1.0, {.dtype = kFloat64}).reshape({1, 4});
  EXPECT_EQ(pad(x, {4, 2}, "circular").to_vector<double>(), (std::vector<double>{1, 2, 3, 4, 1, 2, 3, 4, 1, 2}));
  EXPECT_THROW_MSG(pad(x, {5, 0}, "circular"), "wraps around more than once");
  EXPECT_THROW_MSG(pad(x, {-1, 0}, "circular"), "non-negative amounts");
  EXPECT_THROW_MSG(pad(x, {1, 1}, "circular", 2.0), "does not take a fill value");
}

TEST(PadModes, ThreeSpatialDimsMatchPyTorchWithGradients) {
  // y = F.pad(x, (1, 2, 2, 1, 1, 1), mode), x = sin(arange(36) * 0.7).reshape(1, 1, 3, 3, 4);
  // checksums of y and of x.grad of sum(y * w)
  const std::vector<std::tuple<const char*, double, double>> refs{
      {"reflect", 4.8376742252386542, -29.815980548813869},
      {"replicate", -0.67001237392971036, 25.499970030524896},
      {"circular", 3.7266176503408324, 5.9748584442255464}};
  for (const auto& [mode, sum, grad_sum] : refs) {
    SCOPED_TRACE(mode);
    Tensor x = wave({1, 1, 3, 3, 4}, 0.7).requires_grad_(true);
    Tensor y = pad(x, {1, 2, 2, 1, 1, 1}, mode);
    ASSERT_EQ(y.sizes(), (Shape{1, 1, 5, 6, 7}));
    EXPECT_NEAR(checksum(y.detach(), 0.3), sum, 1e-12);
    weighted(y, 0.3).backward();
    EXPECT_NEAR(checksum(x.grad(), 0.5), grad_sum, 1e-12);
    testing::expect_gradcheck([m = std::string(mode)](const TensorList& a) { return pad(a[0], {1, 2, 2, 1, 1, 0}, m); },
                              {testing::random_tensor({2, 3, 3, 4}, kFloat64, true)});
  }
}

// Conv layers with padding_mode: weight = wave(weight.shape, 1.3), bias = wave([C_out], 2.1).
template <typename M>
void set_parameters(M& m) {
  NoGradGuard no_grad;
  m.weight().copy_(wave(m.weight().sizes(), 1.3));
  if (m.bias().defined()) m.bias().copy_(wave(m.bias().sizes(), 2.1));
}

// The module applied to wave(input_shape, 0.7): output checksum and first values, and the checksums
// of the input's and the weight's gradients.
template <typename M>
void expect_module_matches(M& m, const Shape& input_shape, const Reference& ref) {
  set_parameters(m);
  Tensor x = wave(input_shape, 0.7).requires_grad_(true);
  Tensor y = m(x);
  ASSERT_EQ(y.sizes(), ref.shape);
  EXPECT_NEAR(checksum(y.detach(), 0.3), ref.sum, 1e-10);
  expect_close(y.detach().flatten().slice(0, 0, 8), f64(ref.first), 1e-12, 1e-12);
  weighted(y, 0.3).backward();
  EXPECT_NEAR(checksum(x.grad(), 0.5), ref.grads[0], 1e-10);
  EXPECT_NEAR(checksum(m.weight().grad(), 0.5), ref.grads[1], 1e-10);
}

TEST(ConvPaddingMode, Conv2dMatchesPyTorch) {
  // nn.Conv2d(2, 3, (3, 2), stride=(2, 1), padding=(1, 2), dilation=(1, 2), padding_mode=mode) on
  // x = sin(arange(120) * 0.7).reshape(2, 2, 5, 6)
  const std::vector<std::pair<const char*, Reference>> refs{
      {"reflect",
       {{2, 3, 3, 8},
        7.2560838624582171,
        {1.2288559487884771, 1.0339293337825937, 0.35272959750726945, 3.1358692966130617, 4.4441606662123361,
         3.6622938325660073, 2.4193308556263311, 0.03851877419818802},
        {3.706777468603192, 35.967737522968292}}},
      {"replicate",
       {{2, 3, 3, 8},
        0.94756793508428117,
        {0.44935078188721567, 1.4652432908857711, 2.2346077480215456, 2.9952497795408823, 2.347179037673313,
         0.59519331870383363, -0.48953802780065248, -1.3580146136551123},
        {-0.40437590560158965, 55.186156780546021}}},
      {"circular",
       {{2, 3, 3, 8},
        3.4165263555850385,
        {-0.8331612452884164, -2.079590562574344, 0.41258975042208818, 3.1858525721483391, 4.4607591488736054,
         3.637700996599226, -0.8331612452884164, -2.079590562574344},
        {0.45146158921294366, 8.5727393719319664}}}};
  for (const auto& [mode, ref] : refs) {
    SCOPED_TRACE(mode);
    nn::Conv2d conv(2, 3, {3, 2}, {2, 1}, Shape{1, 2}, {1, 2}, 1, true, mode, {.dtype = kFloat64});
    EXPECT_EQ(conv.padding_mode(), mode);
    expect_module_matches(conv, {2, 2, 5, 6}, ref);
  }
}

TEST(ConvPaddingMode, SamePaddingConv1dAndConv3dMatchPyTorch) {
  // nn.Conv1d(2, 2, 3, padding="same", padding_mode="circular", dilation=2) on sin(arange(14) * 0.7).reshape(1, 2, 7)
  nn::Conv1d c1(2, 2, 3, 1, "same", 2, 1, true, "circular", {.dtype = kFloat64});
  expect_module_matches(c1, {1, 2, 7},
                        {{1, 2, 7},
                         -2.0163857438168598,
                         {0.79180581973074504, 1.5452881828494829, 1.9956430845984092, 0.68851048437172968,
                          -0.94243935492805631, -1.7561977784321017, -1.6050545445084807, -1.3502373177266769},
                         {3.7705746611336752, 2.5438703437057475}});
  // nn.Conv1d(2, 2, 4, padding="same", padding_mode="reflect") on an unbatched [2, 7] input (even kernel)
  nn::Conv1d c2(2, 2, 4, 1, "same", 1, 1, true, "reflect", {.dtype = kFloat64});
  expect_module_matches(c2, {2, 7},
                        {{2, 7},
                         7.1129611527799739,
                         {-0.62429543073099247, 1.4936427419299665, 2.6967951705270621, 2.6316026918383608,
                          1.3287263472517361, -0.64386758510389619, -0.7687147486360143, 2.809793413114309},
                         {5.0875273310184825, -4.6649868585489846}});
  // nn.Conv3d(2, 2, 3, padding=1, padding_mode="replicate") on sin(arange(72) * 0.7).reshape(1, 2, 3, 4, 3)
  nn::Conv3d c3(2, 2, {3}, {1}, 1, {1}, 1, true, "replicate", {.dtype = kFloat64});
  EXPECT_EQ(c3.extra_repr(), "2, 2, kernel_size=(3, 3, 3), stride=(1, 1, 1), padding=(1, 1, 1), padding_mode=replicate");
  expect_module_matches(c3, {1, 2, 3, 4, 3},
                        {{1, 2, 3, 4, 3},
                         1.8410007087273086,
                         {0.81858782759302273, -0.13421985013014678, -1.0997159568861148, -1.7141941492416377,
                          -0.18623977795251662, -0.72039322415440254, 0.3260544960426206, 0.404784772032732},
                         {-6.7196267319582308, 29.610568863083284}});
  // "zeros" is the plain convolution; "valid" ignores the mode
  nn::Conv2d z(2, 3, {3}, {1}, 1, {1}, 1, true, "zeros");
  Tensor x = randn({1, 2, 5, 5});
  expect_close(z(x), conv2d(x, z.weight(), z.bias(), {1}, 1));
  nn::Conv2d v(2, 3, {3}, {1}, "valid", {1}, 1, true, "circular");
  expect_close(v(x), conv2d(x, v.weight(), v.bias()));
  EXPECT_THROW_MSG(nn::Conv2d(2, 3, {3}, {1}, 1, {1}, 1, true, "mirror"), "padding_mode must be one of");
}

TEST(Conv3d, MatchesPyTorch) {
  // F.conv3d(x, w, b, (2, 1, 2), (1, 0, 2), (1, 2, 1), 2), inputs sin(arange(n) * f) for f = 0.7, 1.3, 1.9
  expect_matches({{2, 6, 3, 4, 4},
                  17.335051721463767,
                  {0.085735191167198715, 0.22230088598130476, 0.10591750444919568, 0.050511185681931296,
                   -0.091205448567271682, -0.23242818390709633, -0.026464573354004938, -0.027090302046967385},
                  {-19.902340533459988, 27.608533020175805, 2.1322635816996982}},
                 {{2, 4, 5, 6, 5}, {6, 2, 3, 2, 3}, {6}},
                 [](const TensorList& a) { return conv3d(a[0], a[1], a[2], {2, 1, 2}, Shape{1, 0, 2}, {1, 2, 1}, 2); });
  // F.conv3d(x, w, None, 1, "same", (2, 1, 1))
  expect_matches({{1, 3, 4, 5, 3},
                  -0.91794740034539402,
                  {4.1644663001372839, 3.1299692157907675, 0.73394966378043147, -4.2308527877684883,
                   -5.1320143801983598, -1.8484010087154286, -0.40469262269784628, 3.0004574382400069},
                  {4.459723825538962, 34.148022118488491}},
                 {{1, 2, 4, 5, 3}, {3, 2, 2, 3, 2}},
                 [](const TensorList& a) { return conv3d(a[0], a[1], Tensor(), {1}, "same", {2, 1, 1}); });
}

TEST(ConvTranspose, MatchesPyTorch) {
  // F.conv_transpose1d(x, w, b, stride=3, padding=1, output_padding=2, groups=2, dilation=2)
  expect_matches({{2, 6, 23},
                  -0.63484395632265045,
                  {0, -0.41279420306895598, 0.4810148151344702, -0.96945669436603898, 0.35550379304608176,
                   -0.012811916150722764, -0.29082111871162125, 0.95660280039155066},
                  {-1.3189539852181573, 1.9997517818091932, 2.1797361287877037}},
                 {{2, 4, 7}, {4, 3, 3}, {6}},
                 [](const TensorList& a) { return conv_transpose1d(a[0], a[1], a[2], {3}, {1}, {2}, 2, {2}); });
  // F.conv_transpose2d(x, w, b, (2, 3), (1, 0), (1, 2), groups=2, dilation=(1, 2))
  expect_matches({{2, 4, 8, 17},
                  -15.101109546744123,
                  {-0.59915184284135714, 0, 0.59985224911074742, -0.17944034139867346, 0, 0.069062301516206376,
                   0.32466475643648302, 0},
                  {5.9004480132649064, 1.6824585456126062, -7.9012121814802807}},
                 {{2, 4, 4, 5}, {4, 2, 3, 2}, {4}},
                 [](const TensorList& a) { return conv_transpose2d(a[0], a[1], a[2], {2, 3}, {1, 0}, {1, 2}, 2, {1, 2}); });
  // F.conv_transpose3d(x, w, b, 2, (0, 1, 1), (1, 0, 1))
  expect_matches({{1, 3, 7, 7, 5},
                  2.1285261009087235,
                  {0.028292772230657074, -0.19644751092532173, -0.15084666222724802, -0.24932991598442775,
                   -0.25904055439556239, 0.15363914552748914, 0.20196243105421632, 0.31115261630633856},
                  {1.571034261203915, 48.887829168069146, -4.125866655317374}},
                 {{1, 2, 3, 4, 3}, {2, 3, 2, 3, 2}, {3}},
                 [](const TensorList& a) { return conv_transpose3d(a[0], a[1], a[2], {2}, {0, 1, 1}, {1, 0, 1}); });
  // unbatched: F.conv_transpose2d(x, w, None, 1, 1) with x [3, 4, 4]
  expect_matches({{2, 4, 4},
                  2.7592686401288038,
                  {-2.1723538807358134, -1.7517689596448514, -2.6836010802228527, -3.9329212884165483,
                   2.0400710684736083, 2.1180448579542044, 3.07081038880722, 3.5625356921313474},
                  {1.896497014908664, -1.5572727349756277}},
                 {{3, 4, 4}, {3, 2, 3, 3}},
                 [](const TensorList& a) { return conv_transpose2d(a[0], a[1], Tensor(), {1}, {1}); });
}

TEST(ConvTranspose, ModulesMatchPyTorch) {
  // nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2) on sin(arange(36) * 0.7).reshape(1, 4, 3, 3)
  nn::ConvTranspose2d m(4, 6, {3}, {2}, {1}, {1}, 2, true, {1}, {.dtype = kFloat64});
  EXPECT_EQ(m.weight().sizes(), (Shape{4, 3, 3, 3}));
  EXPECT_EQ(m.named_parameters()[0].first, "weight");
  EXPECT_EQ(m.named_parameters()[1].first, "bias");
  expect_module_matches(m, {1, 4, 3, 3},
                        {{1, 6, 6, 6},
                         13.978707709605413,
                         {0.0086547891012598473, 0.17855466044669854, -0.2309597564455074, -0.039059448062880198,
                          -0.36195031969020919, -0.46827558189495194, 0.012131627388254761, 0.36093143601234762},
                         {3.8979060665936394, 2.608213644050529}});
  // printed as PyTorch prints it
  EXPECT_EQ(nn::ConvTranspose2d(4, 6, {3}, {2}, {1}, {1}, 2, false).extra_repr(),
            "4, 6, kernel_size=(3, 3), stride=(2, 2), padding=(1, 1), output_padding=(1, 1), groups=2, bias=False");
  // init bounds: fan_in = weight.size(1) * kernel = 3 * 27 (PyTorch's fan of the [in, out/groups, k...] weight)
  manual_seed(0);
  nn::ConvTranspose3d t3(4, 6, {3}, {1}, {0}, {0}, 2);
  const double bound = 1.0 / std::sqrt(81.0);
  EXPECT_LE(t3.weight().abs().amax().item<double>(), bound);
  EXPECT_GT(t3.weight().abs().amax().item<double>(), 0.8 * bound);
  EXPECT_LE(t3.bias().abs().amax().item<double>(), bound);
  EXPECT_EQ(t3(randn({2, 4, 3, 3, 3})).sizes(), (Shape{2, 6, 5, 5, 5}));
  // output_size picks output_padding: sizes 5 and 6 are both reachable with stride 2
  nn::ConvTranspose2d up(2, 2, {3}, {2}, {1});
  EXPECT_EQ(up.forward(randn({1, 2, 3, 3}), {6, 5}).sizes(), (Shape{1, 2, 6, 5}));
  EXPECT_EQ(up.forward(randn({1, 2, 3, 3}), {1, 2, 5, 6}).sizes(), (Shape{1, 2, 5, 6}));
  EXPECT_THROW_MSG(up.forward(randn({1, 2, 3, 3}), {7, 5}), "dim 0 must be between 5 and 6, got 7");
  nn::ConvTranspose1d t1(3, 2, 4, 2, 1);
  EXPECT_EQ(t1.weight().sizes(), (Shape{3, 2, 4}));
  EXPECT_EQ(t1(randn({3, 5})).sizes(), (Shape{2, 10}));
  nn::Conv3d c3(2, 4, {3, 1, 2});
  EXPECT_EQ(c3.weight().sizes(), (Shape{4, 2, 3, 1, 2}));
  EXPECT_EQ(c3.named_parameters().size(), 2u);
}

// The transposed convolution is the adjoint of the convolution: <conv(x, w), y> = <x, conv_transpose(y, w)>.
TEST(ConvTranspose, IsTheAdjointOfConv) {
  Tensor x = testing::random_tensor({2, 4, 7, 6, 5}), w = testing::random_tensor({6, 2, 3, 2, 3});
  Tensor y = conv3d(x, w, Tensor(), {2, 1, 2}, Shape{1, 0, 1}, {1, 2, 1}, 2);
  Tensor r = testing::random_tensor(y.sizes());
  // output_padding restores the sizes the stride rounded away
  Tensor xt = conv_transpose3d(r, w, Tensor(), {2, 1, 2}, {1, 0, 1}, {0, 0, 0}, 2, {1, 2, 1});
  ASSERT_EQ(xt.sizes(), (Shape{2, 4, 7, 6, 5}));
  EXPECT_NEAR((y * r).sum().item<double>(), (x * xt).sum().item<double>(), 1e-10);
}

TEST(ConvNd, Gradients) {
  using L = const TensorList&;
  auto rnd = [](std::vector<Shape> shapes) {
    TensorList t;
    for (const Shape& s : shapes) t.push_back(testing::random_tensor(s, kFloat64, true));
    return t;
  };
  auto c3 = [](L a) { return conv3d(a[0], a[1], a[2], {2, 1, 1}, Shape{1, 0, 1}, {1, 1, 2}, 2); };
  testing::expect_gradcheck(c3, rnd({{2, 4, 4, 3, 5}, {2, 2, 2, 2, 2}, {2}}));
  testing::expect_gradgradcheck(c3, rnd({{1, 4, 3, 3, 4}, {2, 2, 2, 2, 2}, {2}}));
  auto t1 = [](L a) { return conv_transpose1d(a[0], a[1], a[2], {2}, {1}, {1}, 2, {2}); };
  testing::expect_gradcheck(t1, rnd({{2, 4, 5}, {4, 1, 3}, {2}}));
  auto t2 = [](L a) { return conv_transpose2d(a[0], a[1], a[2], {2, 1}, {0, 1}, {1, 0}); };
  testing::expect_gradcheck(t2, rnd({{1, 2, 3, 4}, {2, 3, 2, 3}, {3}}));
  testing::expect_gradgradcheck(t2, rnd({{1, 2, 3, 3}, {2, 2, 2, 2}, {2}}));
  auto t3 = [](L a) { return conv_transpose3d(a[0], a[1], a[2], {2}, {1}, {1}); };
  testing::expect_gradcheck(t3, rnd({{1, 2, 2, 3, 2}, {2, 2, 3, 2, 3}, {2}}));
  // padding modes through the modules' composition: pad then convolve
  auto padded = [](L a) { return conv2d(pad(a[0], {1, 1, 2, 0}, "circular"), a[1]); };
  testing::expect_gradcheck(padded, rnd({{1, 2, 4, 4}, {3, 2, 3, 3}}));
}

TEST(ConvNd, NonContiguousAndEmptyInputs) {
  Tensor x = testing::random_tensor({2, 5, 4, 6, 3}).permute({0, 4, 1, 2, 3});  // [2, 3, 5, 4, 6]
  Tensor w = testing::random_tensor({4, 3, 2, 2, 3});
  expect_close(conv3d(x, w, Tensor(), {1}, 1), conv3d(x.contiguous(), w, Tensor(), {1}, 1), 1e-12, 1e-12);
  Tensor wt = testing::random_tensor({3, 2, 2, 2, 2});
  expect_close(conv_transpose3d(x, wt, Tensor(), {2}), conv_transpose3d(x.contiguous(), wt, Tensor(), {2}), 1e-12,
               1e-12);
  EXPECT_EQ(conv3d(zeros({0, 3, 4, 4, 4}, {.dtype = kFloat64}), w).sizes(), (Shape{0, 4, 3, 3, 2}));
  Tensor e = zeros({0, 3, 2, 2, 2}, {.dtype = kFloat64}).requires_grad_(true);
  Tensor we = wt.detach().requires_grad_(true);
  Tensor ye = conv_transpose3d(e, we, Tensor(), {2});
  EXPECT_EQ(ye.sizes(), (Shape{0, 2, 4, 4, 4}));
  ye.sum().backward();
  EXPECT_EQ(we.grad().abs().sum().item<double>(), 0.0);
}

// float32 through oneDNN and through im2col + GEMM agree on 3-D and transposed convolutions.
TEST(ConvNd, OneDnnAndIm2colAgree) {
  if (!cpu_conv_onednn_available()) GTEST_SKIP() << "built without oneDNN";
  const bool before = cpu_conv_onednn();
  Tensor x = testing::random_tensor({2, 4, 5, 6, 5}, kFloat32), w = testing::random_tensor({6, 2, 3, 2, 3}, kFloat32);
  Tensor wt = testing::random_tensor({4, 3, 2, 3, 2}, kFloat32);
  auto run = [&](bool onednn) {
    set_cpu_conv_onednn(onednn);
    Tensor xl = x.detach().requires_grad_(true), wl = w.detach().requires_grad_(true);
    Tensor wtl = wt.detach().requires_grad_(true);
    Tensor y = conv3d(xl, wl, Tensor(), {2, 1, 2}, Shape{1, 0, 1}, {1, 2, 1}, 2);
    Tensor z = conv_transpose3d(xl, wtl, Tensor(), {2, 1, 2}, {1, 0, 1}, {1, 0, 0}, 2);
    TensorList gr = grad({(y * y).sum() + (z * z).sum()}, {xl, wl, wtl});
    return cat({y.flatten(), z.flatten(), gr[0].flatten(), gr[1].flatten(), gr[2].flatten()});
  };
  expect_close(run(true), run(false), 1e-4, 1e-4);
  set_cpu_conv_onednn(before);
}

TEST(ConvNd, RejectsBadInput) {
  Tensor w = ones({4, 3, 3, 3, 3});
  EXPECT_THROW_MSG(conv3d(ones({3, 5, 5}), w), "[conv3d] expected 4-D (unbatched) or 5-D (batched) input");
  EXPECT_THROW_MSG(conv3d(ones({1, 2, 5, 5, 5}), w), "to have 3 channels");
  EXPECT_THROW_MSG(conv3d(ones({1, 3, 5, 2, 5}), w), "[conv3d] input of shape [1, 3, 5, 2, 5] with padding [0, 0, 0] is smaller than the dilated kernel (3x3x3)");
  EXPECT_THROW_MSG(conv3d(ones({1, 3, 5, 5, 5}), w, Tensor(), {1, 1}), "expected stride as one or three values");
  EXPECT_THROW_MSG(conv3d(ones({1, 3, 5, 5, 5}), w, Tensor(), {2}, "same"), "not supported for strided");
  Tensor wt = ones({3, 2, 3, 3});
  EXPECT_THROW_MSG(conv_transpose2d(ones({1, 4, 5, 5}), wt), "[conv_transpose2d] expected input of shape [1, 4, 5, 5] to have 3 channels");
  EXPECT_THROW_MSG(conv_transpose2d(ones({1, 3, 5, 5}), wt, Tensor(), {2}, {0}, {2}),
                   "output_padding [2, 2] must be smaller than either stride [2, 2] or dilation [1, 1]");
  EXPECT_THROW_MSG(conv_transpose2d(ones({1, 3, 5, 5}), wt, ones({3})), "expected bias of shape [2]");
  EXPECT_THROW_MSG(conv_transpose2d(ones({1, 3, 5, 5}), wt, Tensor(), {1}, {1}, {0}, 2), "in_channels (3) to be divisible by groups (2)");
  EXPECT_THROW_MSG(conv_transpose1d(ones({1, 3, 2}), ones({3, 1, 2}), Tensor(), {1}, {2}), "non-positive output size");
  EXPECT_THROW_MSG(conv_transpose3d(ones({1, 3, 2, 2, 2}), wt), "expected a 5-D weight");
  EXPECT_THROW_MSG(conv_transpose1d(ones({1, 3, 4}), ones({3, 1, 2}), Tensor(), {0}), "expected positive stride, got [0]");
  EXPECT_THROW_MSG(nn::ConvTranspose2d(3, 4, {3}, {1}, {0}, {0}, 2), "in_channels (3) must be divisible by groups (2)");
  EXPECT_THROW_MSG(nn::Conv3d(3, 4, {3, 3}), "expected kernel_size as one or three values");
}

// Under autocast conv3d and the transposed convolutions run in the 16-bit dtype (as conv2d does);
// the CPU computes 16-bit convolutions in float32 and rounds the result.
TEST(ConvNd, AutocastRunsInLowPrecision) {
  Tensor x = testing::random_tensor({1, 2, 3, 4, 3}, kFloat32), w = testing::random_tensor({3, 2, 2, 2, 2}, kFloat32);
  Tensor wt = testing::random_tensor({2, 3, 2, 2, 2}, kFloat32);
  AutocastGuard amp(kCPU, kBFloat16);
  Tensor y = conv3d(x, w);
  Tensor t = conv_transpose3d(x, wt);
  Tensor t1 = conv_transpose1d(x.select(2, 0).select(2, 0), wt.select(2, 0).select(2, 0));
  EXPECT_EQ(y.dtype(), kBFloat16);
  EXPECT_EQ(t.dtype(), kBFloat16);
  EXPECT_EQ(t1.dtype(), kBFloat16);
  AutocastGuard off(kCPU, kBFloat16, false);
  expect_close(y.to(kFloat32), conv3d(x.to(kBFloat16), w.to(kBFloat16)).to(kFloat32), 0, 0);
  expect_close(t.to(kFloat32), conv_transpose3d(x, wt), 2e-2, 2e-2);
}

// Traced and compiled, the 3-D, transposed and padded convolutions and the N-d pools give eager's
// values and gradients (aot_eager on the CPU; CUDA graphs on the GPU, every call after the first replayed).
void expect_compiled_matches_eager(const std::string& backend, Device device) {
  manual_seed(6);
  auto conv = std::make_shared<nn::Conv3d>(2, 4, Shape{3}, Shape{1}, ConvPadding(1), Shape{1}, 1, true, "circular",
                                           TensorOptions{.device = device});
  auto up = std::make_shared<nn::ConvTranspose3d>(4, 2, Shape{2}, Shape{2}, Shape{0}, Shape{0}, 1, true, Shape{1},
                                                  TensorOptions{.device = device});
  auto fn = [conv, up](const Tensor& x) {
    Tensor h = max_pool3d((*conv)(x).relu(), {2});
    return avg_pool3d((*up)(h), {3}, {1}, {1}, false, true, 4).sum();
  };
  auto compiled = compile(fn, CompileOptions{.backend = backend});
  for (int i = 0; i < 3; ++i) {
    Tensor x = randn({2, 2, 4, 6, 4}, {.device = device});
    Tensor xe = x.detach().requires_grad_(true), xc = x.detach().clone().requires_grad_(true);
    Tensor le = fn(xe);
    le.backward();
    const Tensor gw = conv->weight().grad().clone(), gu = up->weight().grad().clone();
    conv->zero_grad();
    up->zero_grad();
    Tensor lc = compiled(xc);
    lc.backward();
    expect_close(lc, le, 1e-4, 1e-5);
    expect_close(xc.grad(), xe.grad(), 1e-4, 1e-5);
    expect_close(conv->weight().grad(), gw, 1e-4, 1e-5);
    expect_close(up->weight().grad(), gu, 1e-4, 1e-5);
    conv->zero_grad();
    up->zero_grad();
  }
  EXPECT_EQ(compiled.counters().compilations, 1);
}

TEST(ConvNd, CompiledMatchesEager) { expect_compiled_matches_eager("aot_eager", kCPU); }

TEST(ConvNdCuda, CapturedInCudaGraphsMatchesEager) {
  TG_REQUIRE_CUDA();
  expect_compiled_matches_eager("cudagraphs", cuda_device(0));
}

TEST(ConvNdCuda, CudnnMatchesCpu) {
  TG_REQUIRE_CUDA();
  using L = const TensorList&;
  for (DType dt : {kFloat32, kFloat64}) {
    SCOPED_TRACE(dtype_name(dt));
    auto grads_of = [](testing::TensorFn fwd) {
      return [fwd](L in) {
        TensorList leaves;
        for (const Tensor& t : in) leaves.push_back(t.detach().requires_grad_(true));
        Tensor y = fwd(leaves);
        TensorList g = grad({(y * y).sum()}, leaves);
        TensorList flat{y.flatten()};
        for (const Tensor& t : g) flat.push_back(t.flatten());
        return cat(flat);
      };
    };
    Tensor x = testing::random_tensor({2, 4, 6, 5, 7}, dt), w = testing::random_tensor({6, 2, 3, 2, 3}, dt);
    Tensor b = testing::random_tensor({6}, dt);
    testing::expect_cuda_matches_cpu(
        grads_of([](L a) { return conv3d(a[0], a[1], a[2], {2, 1, 2}, Shape{1, 0, 1}, {1, 2, 1}, 2); }), {x, w, b},
        1e-4, 1e-4);
    Tensor wt = testing::random_tensor({4, 3, 2, 3, 2}, dt), bt = testing::random_tensor({6}, dt);
    testing::expect_cuda_matches_cpu(
        grads_of([](L a) { return conv_transpose3d(a[0], a[1], a[2], {2, 1, 2}, {1, 0, 1}, {1, 0, 0}, 2); }),
        {x, wt, bt}, 1e-4, 1e-4);
    Tensor x2 = testing::random_tensor({2, 4, 5, 6}, dt), w2 = testing::random_tensor({4, 3, 3, 2}, dt);
    testing::expect_cuda_matches_cpu(
        grads_of([](L a) { return conv_transpose2d(a[0], a[1], a[2], {2, 3}, {1, 0}, {1, 2}, 1, {1, 2}); }),
        {x2, w2, testing::random_tensor({3}, dt)}, 1e-4, 1e-4);
    Tensor x1 = testing::random_tensor({3, 4, 9}, dt), w1 = testing::random_tensor({4, 2, 3}, dt);
    testing::expect_cuda_matches_cpu(grads_of([](L a) { return conv_transpose1d(a[0], a[1], Tensor(), {3}, {1}, {2}, 2, {2}); }),
                                     {x1, w1}, 1e-4, 1e-4);
    testing::expect_cuda_matches_cpu(
        grads_of([](L a) { return conv2d(pad(a[0], {1, 2, 2, 1}, "reflect"), a[1]); }),
        {x2, testing::random_tensor({3, 4, 3, 3}, dt)}, 1e-4, 1e-4);
  }
}

TEST(ConvNdCuda, GradcheckOnTheGpuInFloat64) {
  TG_REQUIRE_CUDA();
  auto fn = [](const TensorList& in) {
    TensorList c;
    for (const Tensor& t : in) c.push_back(t.to(cuda_device(0)));
    return (conv3d(c[0], c[1], c[2], {1}, 1) + conv_transpose3d(c[0], c[3], Tensor(), {1}, {1})).to(kCPU);
  };
  testing::expect_gradcheck(fn, {testing::random_tensor({1, 2, 3, 4, 3}, kFloat64, true),
                                 testing::random_tensor({3, 2, 3, 3, 3}, kFloat64, true),
                                 testing::random_tensor({3}, kFloat64, true),
                                 testing::random_tensor({2, 3, 3, 3, 3}, kFloat64, true)});
}

}  // namespace
}  // namespace tg
