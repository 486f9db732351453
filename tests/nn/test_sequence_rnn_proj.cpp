// LSTM projections (proj_size) and unbatched input for LSTM/GRU: PyTorch's parameter names and
// shapes, values and gradients against PyTorch (torch 1.13, float64, weights set explicitly),
// finite-difference gradients, CUDA against the CPU, and errors.
#include <gtest/gtest.h>

#include <cmath>

#include "graphs/testing/parity.h"
#include "support/test_support.h"
#include "support/values.h"

namespace tg {
namespace {

using testing::expect_close;
using testing::expect_values;
using testing::random_tensor;

// 0.5 * sin(0.7 * j + seed) at flat index j: values both sides compute exactly. In PyTorch:
//   (0.5 * torch.sin(0.7 * torch.arange(n, dtype=torch.float64) + seed)).reshape(shape)
Tensor pattern(const Shape& shape, double seed) {
  std::vector<double> v(static_cast<size_t>(shape_numel(shape)));
  for (size_t j = 0; j < v.size(); ++j) v[j] = 0.5 * std::sin(0.7 * static_cast<double>(j) + seed);
  return from_vector(v, shape);
}

// Parameter i (in named_parameters() order) set to pattern(shape, 0.3 * i + 1), as the reference
// script does: for i, (name, p) in enumerate(m.named_parameters()): p.copy_(pattern(p.shape, 0.3*i+1)).
void fill(nn::Module& m) {
  auto params = m.parameters();
  for (size_t i = 0; i < params.size(); ++i)
    params[i].detach().copy_(pattern(params[i].sizes(), 0.3 * static_cast<double>(i) + 1.0).to(params[i].device()));
}

TEST(LstmProjection, ParameterNamesShapesAndRepr) {
  nn::LSTM lstm(3, 3, {.num_layers = 2, .bidirectional = true, .proj_size = 2});
  // [(n, tuple(p.shape)) for n, p in torch.nn.LSTM(3, 3, num_layers=2, bidirectional=True, proj_size=2).named_parameters()]
  const std::vector<std::pair<std::string, Shape>> expected{
      {"weight_ih_l0", {12, 3}}, {"weight_hh_l0", {12, 2}}, {"bias_ih_l0", {12}}, {"bias_hh_l0", {12}},
      {"weight_hr_l0", {2, 3}}, {"weight_ih_l0_reverse", {12, 3}}, {"weight_hh_l0_reverse", {12, 2}},
      {"bias_ih_l0_reverse", {12}}, {"bias_hh_l0_reverse", {12}}, {"weight_hr_l0_reverse", {2, 3}},
      {"weight_ih_l1", {12, 4}}, {"weight_hh_l1", {12, 2}}, {"bias_ih_l1", {12}}, {"bias_hh_l1", {12}},
      {"weight_hr_l1", {2, 3}}, {"weight_ih_l1_reverse", {12, 4}}, {"weight_hh_l1_reverse", {12, 2}},
      {"bias_ih_l1_reverse", {12}}, {"bias_hh_l1_reverse", {12}}, {"weight_hr_l1_reverse", {2, 3}}};
  const auto params = lstm.named_parameters();
  ASSERT_EQ(params.size(), expected.size());
  for (size_t i = 0; i < params.size(); ++i) {
    EXPECT_EQ(params[i].first, expected[i].first);
    EXPECT_EQ(params[i].second.sizes(), expected[i].second) << params[i].first;
  }
  EXPECT_EQ(lstm.to_string(), "LSTM(3, 3, proj_size=2, num_layers=2, bidirectional=True)");
  EXPECT_EQ(lstm.output_size(), 2);
  const auto sd = lstm.state_dict();
  EXPECT_TRUE(sd.count("weight_hr_l1_reverse"));
}

// m = torch.nn.LSTM(3, 3, num_layers=2, bidirectional=True, proj_size=2) (float64), parameters filled;
// x = pattern((3, 2, 3), 5.0), h0 = pattern((4, 2, 2), 6.0), c0 = pattern((4, 2, 3), 7.0);
// out, (h, c) = m(x, (h0, c0));
// ((out * pattern(out.shape, 8.0)).sum() + (h * 0.5).sum() + (c * 0.25).sum()).backward()
TEST(LstmProjection, MatchesPyTorch) {
  nn::LSTM lstm(3, 3, {.num_layers = 2, .bidirectional = true, .proj_size = 2}, {.dtype = kFloat64});
  fill(lstm);
  const Tensor x = pattern({3, 2, 3}, 5.0).requires_grad_(true);
  const nn::RnnOutput r = lstm.forward_with_state(x, pattern({4, 2, 2}, 6.0), pattern({4, 2, 3}, 7.0));
  ASSERT_EQ(r.output.sizes(), (Shape{3, 2, 4}));
  ASSERT_EQ(r.h_n.sizes(), (Shape{4, 2, 2}));
  ASSERT_EQ(r.c_n.sizes(), (Shape{4, 2, 3}));
  ((r.output * pattern({3, 2, 4}, 8.0)).sum() + (r.h_n * 0.5).sum() + (r.c_n * 0.25).sum()).backward();
  const double tol = 1e-8;
  expect_values(r.output, {-0.05678485932, -0.09655126064, -0.4198697227, 0.05402908814, -0.002748532889,
                           -0.1131580381, -0.4367863269, 0.03317212659, -0.06969829864, -0.1150991688,
                           -0.3678299357, 0.08718110771, -0.0296481986, -0.1164065938, -0.4045026239,
                           0.06029539779, -0.07104011684, -0.1196677446, -0.2324713794, 0.1126975081,
                           -0.05514893676, -0.120829084, -0.3045703484, 0.08282226679}, tol);
  expect_values(r.h_n, {-0.01833349459, -0.1058768395, -0.1158771733, -0.09139589031, -0.1586660815,
                        -0.001643507186, -0.1615476362, 0.02630909422, -0.07104011684, -0.1196677446,
                        -0.05514893676, -0.120829084, -0.4198697227, 0.05402908814, -0.4367863269, 0.03317212659},
                tol);
  expect_values(r.c_n, {0.03038077075, 0.1700212352, 0.3926835653, -0.4320656562, 0.5007874133, 0.4565842218,
                        0.4208787297, 0.5037396575, 0.1819263773, 0.462896587, 0.3220609409, 0.4230509208,
                        0.2452475975, -0.2530529863, -0.923629722, 0.1050248868, -0.1918407848, -0.7922647161,
                        -0.5739719607, -0.9620029951, -0.4936585327, -0.7472800569, -1.049729725, -0.4844775832},
                tol);
  expect_values(x.grad(), {0.01048598156, 0.007365464392, 0.000780854235, 0.01294498799, 0.02275212177,
                           0.02185857717, 0.007269416432, 0.01228292619, 0.01151958384, 0.004183101175,
                           0.007473575763, 0.007249110892, 0.04608223466, 0.04415671706, 0.02146360546,
                           0.01310455967, 0.0168100627, 0.01260953058}, tol);
  expect_values(lstm.parameter("weight_hr_l0").grad(),
                {-0.1282647562, 0.2309939901, 0.2026528963, -0.09434712391, 0.1987742942, 0.157119371}, tol);
  expect_values(lstm.parameter("weight_hh_l1_reverse").grad(),
                {0.05141430048, -0.01994380138, 0.03853154888, -0.0291946916, 0.01227723436, -0.01411164068,
                 0.03223335077, 0.0003700354578, 0.06690458528, -0.0009121049202, 0.03958544431, -0.003920534139,
                 -0.04686548156, 0.04564682026, -0.03466820631, 0.03988122093, -0.1284951486, 0.06717095067,
                 0.01853303436, -0.006751323541, 0.01151133878, -0.01575295948, -0.001066013044, -0.006521826088},
                tol);
  expect_values(lstm.parameter("weight_hr_l1_reverse").grad(),
                {-0.1240494747, -0.2487272513, -0.20919643, -0.1382038678, -0.1646727463, -0.08706955499}, tol);
}

// m2 = torch.nn.LSTM(3, 4, bias=False, batch_first=True, proj_size=1), parameters filled;
// out2, (h2, c2) = m2(pattern((4, 3), 9.0), (pattern((1, 1), 10.0), pattern((1, 4), 11.0)))
// -> shapes (4, 1), (1, 1), (1, 4): unbatched input ignores batch_first.
TEST(LstmProjection, UnbatchedMatchesPyTorch) {
  nn::LSTM lstm(3, 4, {.bias = false, .batch_first = true, .proj_size = 1}, {.dtype = kFloat64});
  fill(lstm);
  const nn::RnnOutput r = lstm.forward_with_state(pattern({4, 3}, 9.0), pattern({1, 1}, 10.0), pattern({1, 4}, 11.0));
  ASSERT_EQ(r.output.sizes(), (Shape{4, 1}));
  ASSERT_EQ(r.h_n.sizes(), (Shape{1, 1}));
  ASSERT_EQ(r.c_n.sizes(), (Shape{1, 4}));
  expect_values(r.output, {-0.1624170951, -0.117322174, -0.05086021758, -0.04337402359}, 1e-8);
  expect_values(r.h_n, {-0.04337402359}, 1e-8);
  expect_values(r.c_n, {-0.1564461321, -0.09231424495, 0.02866602939, -0.09419272086}, 1e-8);
}

// m3 = torch.nn.GRU(2, 3, bidirectional=True), parameters filled; out3, h3 = m3(pattern((3, 2), 12.0))
TEST(RnnUnbatched, GruMatchesPyTorchAndTheBatchedRun) {
  for (const bool batch_first : {false, true}) {
    nn::GRU gru(2, 3, {.batch_first = batch_first, .bidirectional = true}, {.dtype = kFloat64});
    fill(gru);
    const Tensor x = pattern({3, 2}, 12.0);
    const nn::RnnOutput r = gru.forward_with_state(x);
    ASSERT_EQ(r.output.sizes(), (Shape{3, 6}));
    ASSERT_EQ(r.h_n.sizes(), (Shape{2, 3}));
    expect_values(r.output, {-0.1959630939, 0.255584819, 0.4347785265, 0.4228061999, 0.5099579992, 0.5128555865,
                             -0.3060037651, -0.1589317661, 0.5374206088, 0.1726291928, 0.3862653403, 0.4697250046,
                             -0.3668612357, -0.09492022591, 0.587597805, 0.2358919898, 0.2910397931, 0.2758218008},
                  1e-8);
    expect_values(r.h_n, {-0.3668612357, -0.09492022591, 0.587597805, 0.4228061999, 0.5099579992, 0.5128555865},
                  1e-8);
    // The same as a batch of one.
    const nn::RnnOutput b = gru.forward_with_state(x.unsqueeze(batch_first ? 0 : 1));
    expect_close(r.output, b.output.squeeze(batch_first ? 0 : 1), 0, 0);
  }
}

// Unbatched LSTM with given 2-D states, through the module's gradient.
TEST(RnnUnbatched, LstmGradcheck) {
  manual_seed(3);
  nn::LSTM lstm(3, 2, {.num_layers = 2}, {.dtype = kFloat64});
  testing::expect_gradcheck(
      [&](const TensorList& in) {
        const nn::RnnOutput r = lstm.forward_with_state(in[0], in[1], in[2]);
        return r.output.sum() + (r.h_n * r.c_n).sum();
      },
      {random_tensor({4, 3}, kFloat64, true), random_tensor({2, 2}, kFloat64, true),
       random_tensor({2, 2}, kFloat64, true)});
}

// Float64 finite differences of rnn() with projections: every leaf (input, states, each weight).
TEST(LstmProjection, Gradcheck) {
  for (const bool bias : {true, false}) {
    SCOPED_TRACE(bias ? "bias" : "no bias");
    manual_seed(4);
    const int64_t T = 3, B = 2, I = 2, H = 3, P = 2;
    auto u = [](const Shape& s) { return random_tensor(s, kFloat64, true, -0.8, 0.8); };
    TensorList leaves{u({T, B, I}), u({4, B, P}), u({4, B, H})};
    for (int64_t l = 0; l < 2; ++l)
      for (int64_t d = 0; d < 2; ++d) {
        leaves.push_back(u({4 * H, l == 0 ? I : 2 * P}));
        leaves.push_back(u({4 * H, P}));
        if (bias) {
          leaves.push_back(u({4 * H}));
          leaves.push_back(u({4 * H}));
        }
        leaves.push_back(u({P, H}));
      }
    testing::expect_gradcheck(
        [](const TensorList& in) {
          const RnnResult r = rnn(RnnMode::LSTM, in[0], in[1], in[2], TensorList(in.begin() + 3, in.end()), 2, true, 2);
          return r.output.sum() + (r.h * r.h).sum() + (r.c * 0.5).sum();
        },
        leaves);
  }
}

TEST(LstmProjection, CudaMatchesCpu) {
  TG_REQUIRE_CUDA();
  for (const DType dtype : {kFloat64, kFloat32}) {
    SCOPED_TRACE(dtype_name(dtype));
    manual_seed(5);
    nn::LSTM cpu(4, 5, {.num_layers = 2, .bidirectional = true, .proj_size = 3}, {.dtype = dtype});
    nn::LSTM gpu(4, 5, {.num_layers = 2, .bidirectional = true, .proj_size = 3}, {.dtype = dtype, .device = cuda_device()});
    auto pc = cpu.parameters();
    auto pg = gpu.parameters();
    for (size_t i = 0; i < pc.size(); ++i) pg[i].detach().copy_(pc[i].detach().to(cuda_device()));
    const Tensor x = random_tensor({6, 2, 4}, dtype);
    auto run = [&](nn::LSTM& m, const Tensor& in) {
      const nn::RnnOutput r = m.forward_with_state(in);
      (r.output.sum() + r.h_n.sum() * 0.5 + r.c_n.sum() * 0.25).backward();
      TensorList out{r.output.detach(), r.h_n.detach(), r.c_n.detach()};
      for (const Tensor& p : m.parameters()) out.push_back(p.grad());
      return out;
    };
    const TensorList want = run(cpu, x), got = run(gpu, x.to(cuda_device()));
    for (size_t i = 0; i < want.size(); ++i)
      expect_close(got[i], want[i], dtype == kFloat64 ? 1e-9 : 1e-4, dtype == kFloat64 ? 1e-11 : 1e-5);
  }
}

TEST(LstmProjection, CompiledMatchesEager) {
  auto lstm = std::make_shared<nn::LSTM>(3, 4, nn::RnnOptions{.proj_size = 2}, TensorOptions{.dtype = kFloat64});
  testing::expect_compiled_matches_eager(
      [lstm](const TensorList& in) {
        const nn::RnnOutput r = lstm->forward_with_state(in[0]);
        return TensorList{r.output, r.h_n, r.c_n};
      },
      {random_tensor({3, 2, 3}, kFloat64, true)}, {.compile = {.backend = "aot_eager"}});
}

TEST(LstmProjection, ErrorsNameTheValues) {
  EXPECT_THROW_MSG(nn::GRU(3, 4, {.proj_size = 2}), "[GRU] proj_size argument is only supported for LSTM, not RNN or GRU");
  EXPECT_THROW_MSG(nn::LSTM(3, 4, {.proj_size = 4}),
                   "proj_size has to be smaller than hidden_size, got proj_size 4 and hidden_size 4");
  EXPECT_THROW_MSG(nn::LSTM(3, 4, {.proj_size = -1}), "proj_size should be a positive integer or zero");
  nn::LSTM lstm(3, 4, {.proj_size = 2}, {.dtype = kFloat64});
  const Tensor x = random_tensor({5, 2, 3});
  EXPECT_THROW_MSG(lstm.forward_with_state(x, zeros({1, 2, 4}, {.dtype = kFloat64})),
                   "Expected hidden size [1, 2, 2], got [1, 2, 4]");
  EXPECT_THROW_MSG(lstm.forward_with_state(x, zeros({1, 2, 2}, {.dtype = kFloat64}), zeros({1, 2, 2}, {.dtype = kFloat64})),
                   "Expected hidden size [1, 2, 4] (the cell state), got [1, 2, 2]");
  EXPECT_THROW_MSG(lstm.forward_with_state(random_tensor({5, 3}), zeros({1, 2, 2}, {.dtype = kFloat64})),
                   "For unbatched 2-D input, hx and cx should also be 2-D but got a 3-D tensor");
  EXPECT_THROW_MSG(lstm.forward_with_state(x, zeros({1, 2}, {.dtype = kFloat64})),
                   "For batched 3-D input, hx and cx should also be 3-D but got a 2-D tensor");
  EXPECT_THROW_MSG(lstm.forward_with_state(random_tensor({2, 5, 2, 3})), "[LSTM] Expected input to be 2D or 3D, got 4D");
  EXPECT_THROW_MSG(lstm.forward_with_state(random_tensor({5, 3}), zeros({1, 3}, {.dtype = kFloat64})),
                   "Expected hidden size [1, 2], got [1, 3]");
  // The op itself.
  const auto params = lstm.parameters();
  EXPECT_THROW_MSG(rnn(RnnMode::LSTM, x, zeros({1, 2, 2}, {.dtype = kFloat64}), zeros({1, 2, 4}, {.dtype = kFloat64}),
                       TensorList(params.begin(), params.end() - 1), 1, false, 2),
                   "expected 5 weights (w_ih, w_hh, b_ih, b_hh, w_hr per layer and direction) or 3 without biases, got 4");
  EXPECT_THROW_MSG(rnn(RnnMode::LSTM, x, zeros({1, 2, 2}, {.dtype = kFloat64}), zeros({1, 2, 2}, {.dtype = kFloat64}),
                       params, 1, false, 2),
                   "with hidden_size > proj_size (2), got [1, 2, 2]");
  EXPECT_THROW_MSG(rnn(RnnMode::GRU, x, zeros({1, 2, 2}, {.dtype = kFloat64}), Tensor(), params, 1, false, 2),
                   "proj_size argument is only supported for LSTM, not GRU");
  TensorList bad(params.begin(), params.end());
  bad.back() = zeros({2, 3}, {.dtype = kFloat64});
  EXPECT_THROW_MSG(rnn(RnnMode::LSTM, x, zeros({1, 2, 2}, {.dtype = kFloat64}), zeros({1, 2, 4}, {.dtype = kFloat64}),
                       bad, 1, false, 2),
                   "expected weight_hr_l0 of shape [2, 4] (input_size 3, hidden_size 4), got [2, 3]");
}

}  // namespace
}  // namespace tg
