// LSTM and GRU in 16-bit floats and under autocast: the CPU computes float16/bfloat16 layers in
// float32 (results rounded, gradients in the parameters' dtype), cuDNN runs them in their dtype, and
// under autocast the layers run in the autocast dtype on either device. Every check compares with a
// float32 run of the same (rounded) weights and input.
#include <gtest/gtest.h>

#include <memory>

#include "graphs/testing/parity.h"
#include "support/test_support.h"

namespace tg {
namespace {

using testing::expect_close;
using testing::random_tensor;

std::shared_ptr<nn::RnnBase> make_rnn(bool lstm, int64_t in, int64_t hidden, nn::RnnOptions opts, TensorOptions o) {
  if (lstm) return std::make_shared<nn::LSTM>(in, hidden, opts, o);
  return std::make_shared<nn::GRU>(in, hidden, opts, o);
}

// Copies `from`'s parameter values into `to` (converting dtype and device).
void copy_parameters(nn::Module& to, nn::Module& from) {
  auto dst = to.parameters();
  auto src = from.parameters();
  ASSERT_EQ(dst.size(), src.size());
  for (size_t i = 0; i < dst.size(); ++i) dst[i].detach().copy_(src[i].detach().to(dst[i].device()).to(dst[i].dtype()));
}

// Output, h_n, c_n and every parameter's gradient (in parameters() order) of a weighted loss.
TensorList values_and_grads(nn::RnnBase& m, const Tensor& input, const Tensor& h0 = Tensor()) {
  const nn::RnnOutput r = m.forward_with_state(input, h0);
  const Tensor w = random_tensor(r.output.sizes(), kFloat32, false, -1.0, 1.0).to(r.output.device());
  Tensor loss = (r.output.to(kFloat32) * w).sum() + r.h_n.to(kFloat32).sum() * 0.5;
  if (r.c_n.defined()) loss = loss + r.c_n.to(kFloat32).sum() * 0.25;
  loss.backward();
  TensorList out{r.output.detach(), r.h_n.detach()};
  if (r.c_n.defined()) out.push_back(r.c_n.detach());
  for (const Tensor& p : m.parameters()) out.push_back(p.grad());
  return out;
}

// Tolerances of a 16-bit result against float32: a few units of the dtype's last place, relative to
// values of order one.
double tolerance(DType dtype) { return dtype == kBFloat16 ? 3e-2 : 5e-3; }

// The reported reproduction: a bfloat16/float16 LSTM or GRU whose weights require grad, on the CPU.
TEST(Rnn16Bit, CpuModuleRunsAndMatchesFloat32Rounded) {
  for (const bool lstm : {true, false}) {
    for (const DType dtype : {kBFloat16, kFloat16}) {
      for (const nn::RnnOptions& opts : {nn::RnnOptions{}, nn::RnnOptions{.num_layers = 2, .bidirectional = true}}) {
        SCOPED_TRACE(std::string(lstm ? "LSTM " : "GRU ") + std::string(dtype_name(dtype)) +
                     (opts.bidirectional ? " 2 layers bidirectional" : ""));
        manual_seed(1);
        auto low = make_rnn(lstm, 4, 4, opts, {.dtype = dtype});
        auto ref = make_rnn(lstm, 4, 4, opts, {.dtype = kFloat32});
        copy_parameters(*ref, *low);
        for (const Tensor& p : low->parameters()) ASSERT_TRUE(p.requires_grad());
        const Tensor x = randn({2, 1, 4}).to(dtype);  // as reported: seq 2, batch 1
        manual_seed(2);
        const TensorList got = values_and_grads(*low, x);
        manual_seed(2);
        const TensorList want = values_and_grads(*ref, x.to(kFloat32));
        ASSERT_EQ(got.size(), want.size());
        for (size_t i = 0; i < got.size(); ++i) {
          SCOPED_TRACE("result " + std::to_string(i));
          ASSERT_TRUE(got[i].defined());
          EXPECT_EQ(got[i].dtype(), dtype);  // outputs rounded to the dtype, gradients in the parameters'
          // The float32 result rounded to the dtype, within the dtype's precision.
          expect_close(got[i].to(kFloat32), want[i].to(dtype).to(kFloat32), tolerance(dtype), tolerance(dtype));
        }
      }
    }
  }
}

// A longer batch through the stacked op directly (reserve of several layers and steps), with and
// without grad.
TEST(Rnn16Bit, CpuStackTrainingAndInferenceAgree) {
  for (const RnnMode mode : {RnnMode::LSTM, RnnMode::GRU}) {
    SCOPED_TRACE(mode == RnnMode::LSTM ? "lstm" : "gru");
    const bool lstm = mode == RnnMode::LSTM;
    const int64_t G = lstm ? 4 : 3, H = 5, I = 3, T = 6, B = 3;
    manual_seed(3);
    TensorList w;
    for (int64_t l = 0; l < 2; ++l)
      for (int64_t d = 0; d < 2; ++d)
        for (const Shape& s : {Shape{G * H, l == 0 ? I : 2 * H}, Shape{G * H, H}, Shape{G * H}, Shape{G * H}})
          w.push_back(random_tensor(s, kFloat32, false, -0.5, 0.5).to(kBFloat16).requires_grad_(true));
    const Tensor x = random_tensor({T, B, I}, kFloat32).to(kBFloat16);
    const Tensor h0 = random_tensor({4, B, H}, kFloat32, false, -0.5, 0.5).to(kBFloat16);
    const Tensor c0 = lstm ? random_tensor({4, B, H}, kFloat32, false, -0.5, 0.5).to(kBFloat16) : Tensor();
    const RnnResult train = rnn(mode, x, h0, c0, w, 2, true);
    Tensor infer_out;
    {
      NoGradGuard no_grad;
      infer_out = rnn(mode, x, h0, c0, w, 2, true).output;
    }
    EXPECT_EQ(train.output.dtype(), kBFloat16);
    expect_close(infer_out, train.output, 0, 0);
    train.output.to(kFloat32).sum().backward();
    TensorList w32;
    for (const Tensor& t : w) w32.push_back(t.detach().to(kFloat32).requires_grad_(true));
    const RnnResult ref = rnn(mode, x.to(kFloat32), h0.to(kFloat32), lstm ? c0.to(kFloat32) : Tensor(), w32, 2, true);
    ref.output.sum().backward();
    expect_close(train.output.to(kFloat32), ref.output, 3e-2, 3e-2);
    for (size_t i = 0; i < w.size(); ++i) {
      SCOPED_TRACE("weight " + std::to_string(i));
      EXPECT_EQ(w[i].grad().dtype(), kBFloat16);
      expect_close(w[i].grad().to(kFloat32), w32[i].grad(), 5e-2, 5e-2);
    }
  }
}

// cuDNN in float16/bfloat16 (float32 math) against the CPU in float32.
TEST(Rnn16Bit, CudaMatchesCpuFloat32) {
  TG_REQUIRE_CUDA();
  for (const bool lstm : {true, false}) {
    for (const DType dtype : {kFloat16, kBFloat16}) {
      SCOPED_TRACE(std::string(lstm ? "LSTM " : "GRU ") + std::string(dtype_name(dtype)));
      const nn::RnnOptions opts{.num_layers = 2, .bidirectional = true};
      manual_seed(4);
      auto gpu = make_rnn(lstm, 5, 8, opts, {.dtype = dtype, .device = cuda_device()});
      auto cpu = make_rnn(lstm, 5, 8, opts, {.dtype = kFloat32});
      copy_parameters(*cpu, *gpu);
      const Tensor x = random_tensor({7, 3, 5}, kFloat32).to(dtype);
      manual_seed(5);
      const TensorList got = values_and_grads(*gpu, x.to(cuda_device()));
      manual_seed(5);
      const TensorList want = values_and_grads(*cpu, x.to(kFloat32));
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < got.size(); ++i) {
        SCOPED_TRACE("result " + std::to_string(i));
        ASSERT_TRUE(got[i].defined());
        EXPECT_EQ(got[i].dtype(), dtype);
        expect_close(got[i].to(kCPU).to(kFloat32), want[i], 2 * tolerance(dtype), 2 * tolerance(dtype));
      }
    }
  }
}

std::vector<Device> test_devices() {
  std::vector<Device> d{kCPU};
  if (cuda_is_available()) d.push_back(cuda_device());
  return d;
}

// Under autocast an LSTM/GRU fed by a linear layer (a 16-bit input) runs in the autocast dtype on
// CUDA (outputs in that dtype) and, as PyTorch's CPU autocast, in the weights' float32 on the CPU;
// values as the float32 run within the precision, parameter gradients in float32.
TEST(RnnAutocast, RunsInTheAutocastDtypeAndGivesFloat32Grads) {
  for (const Device device : test_devices()) {
    for (const DType amp : {kBFloat16, kFloat16}) {
      if (device.is_cpu() && amp == kFloat16) continue;  // CPU autocast is bfloat16 (as PyTorch's default)
      for (const bool lstm : {true, false}) {
        SCOPED_TRACE(device.str() + " " + std::string(dtype_name(amp)) + (lstm ? " LSTM" : " GRU"));
        manual_seed(6);
        nn::Linear proj(6, 4, true, {.device = device});
        auto m = make_rnn(lstm, 4, 5, {.num_layers = 2}, {.device = device});
        const Tensor x = random_tensor({5, 2, 6}, kFloat32).to(device);
        const Tensor h0 = random_tensor({2, 2, 5}, kFloat32, false, -0.5, 0.5).to(device);  // float32 h0
        nn::RnnOutput ref = m->forward_with_state(proj.forward(x), h0);
        nn::RnnOutput r;
        {
          AutocastGuard guard(device, amp);
          const Tensor in = proj.forward(x);
          ASSERT_EQ(in.dtype(), amp);
          r = m->forward_with_state(in, h0);
        }
        const DType expected = device.is_cuda() ? amp : kFloat32;
        EXPECT_EQ(r.output.dtype(), expected);
        EXPECT_EQ(r.h_n.dtype(), expected);
        if (lstm) EXPECT_EQ(r.c_n.dtype(), expected);
        expect_close(r.output.to(kFloat32), ref.output, tolerance(amp), tolerance(amp));
        expect_close(r.h_n.to(kFloat32), ref.h_n, tolerance(amp), tolerance(amp));
        r.output.to(kFloat32).sum().backward();
        for (const auto& [name, p] : m->named_parameters()) {
          ASSERT_TRUE(p.grad().defined()) << name;
          EXPECT_EQ(p.grad().dtype(), kFloat32) << name;
        }
        ASSERT_TRUE(proj.parameters()[0].grad().defined());
        EXPECT_EQ(proj.parameters()[0].grad().dtype(), kFloat32);
      }
    }
  }
}

// A float32 input, h0 and c0 under autocast: cast like the weights, no dtype mismatch.
TEST(RnnAutocast, Float32StatesAreCastToo) {
  for (const Device device : test_devices()) {
    SCOPED_TRACE(device.str());
    nn::GRU gru(3, 4, {}, {.device = device});
    nn::LSTM lstm(3, 4, {}, {.device = device});
    const Tensor x = random_tensor({2, 1, 3}, kFloat32).to(device), h0 = zeros({1, 1, 4}).to(device);
    AutocastGuard guard(device, kBFloat16);
    const DType expected = device.is_cuda() ? kBFloat16 : kFloat32;  // PyTorch's CPU autocast casts no RNN
    EXPECT_EQ(gru.forward_with_state(x, h0).output.dtype(), expected);
    EXPECT_EQ(gru.forward_with_state(x.to(kBFloat16), h0).h_n.dtype(), expected);
    EXPECT_EQ(lstm.forward_with_state(x.to(kBFloat16), h0, h0).c_n.dtype(), expected);
  }
}

// lstm_layer and gru_layer called directly cast as the modules do: a 16-bit input beside float32
// states and weights runs (in the autocast dtype on CUDA, float32 on the CPU), near the float32 run,
// with float32 weight gradients.
TEST(RnnAutocast, LayerFunctionsCastLikeTheModules) {
  for (const Device device : test_devices()) {
    for (const bool lstm : {true, false}) {
      SCOPED_TRACE(device.str() + (lstm ? " LSTM" : " GRU"));
      manual_seed(9);
      const int64_t gates = lstm ? 4 : 3;
      const Tensor x = random_tensor({4, 2, 3}, kFloat32).to(device);
      const Tensor h0 = random_tensor({2, 5}, kFloat32, false, -0.5, 0.5).to(device);
      const Tensor c0 = random_tensor({2, 5}, kFloat32, false, -0.5, 0.5).to(device);
      TensorList w{random_tensor({gates * 5, 3}, kFloat32).to(device), random_tensor({gates * 5, 5}, kFloat32).to(device),
                   random_tensor({gates * 5}, kFloat32).to(device), random_tensor({gates * 5}, kFloat32).to(device)};
      for (Tensor& t : w) t = t.detach().requires_grad_(true);
      const auto run = [&](const Tensor& in) {
        return lstm ? lstm_layer(in, h0, c0, w[0], w[1], w[2], w[3]) : gru_layer(in, h0, w[0], w[1], w[2], w[3]);
      };
      const RnnLayerResult ref = run(x);
      RnnLayerResult r;
      {
        AutocastGuard guard(device, kBFloat16);
        r = run(x.to(kBFloat16));
      }
      EXPECT_EQ(r.output.dtype(), device.is_cuda() ? kBFloat16 : kFloat32);
      expect_close(r.output.to(kFloat32), ref.output, tolerance(kBFloat16), tolerance(kBFloat16));
      r.output.to(kFloat32).sum().backward();
      for (const Tensor& t : w) {
        ASSERT_TRUE(t.grad().defined());
        EXPECT_EQ(t.grad().dtype(), kFloat32);
      }
    }
  }
}

// Compiled under autocast equals eager under autocast (values, dtypes and gradients).
TEST(RnnAutocast, CompiledMatchesEager) {
  for (const Device device : test_devices()) {
    for (const bool lstm : {true, false}) {
      SCOPED_TRACE(device.str() + (lstm ? " LSTM" : " GRU"));
      manual_seed(7);
      auto proj = std::make_shared<nn::Linear>(6, 4, true, TensorOptions{.device = device});
      auto m = make_rnn(lstm, 4, 3, {.bidirectional = true}, {.device = device});
      AutocastGuard guard(device, kBFloat16);
      testing::expect_compiled_matches_eager(
          [proj, m](const TensorList& in) {
            const nn::RnnOutput r = m->forward_with_state(proj->forward(in[0]), in[1]);
            return TensorList{r.output, r.h_n, r.output.to(kFloat32).sum() * in[2]};
          },
          {random_tensor({4, 2, 6}, kFloat32).to(device), random_tensor({2, 2, 3}, kFloat32).to(device),
           random_tensor({1}, kFloat32, true).to(device).detach().requires_grad_(true)},
          {.compile = {.backend = "aot_eager"}});
    }
  }
}

}  // namespace
}  // namespace tg
