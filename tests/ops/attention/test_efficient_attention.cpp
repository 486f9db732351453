// Memory-efficient attention (float32 and float64 on CUDA): values and gradients against the
// composed path for causal and full attention, lengths off the tile sizes, unequal L and S and head
// dims, 3-D operands; finite differences in float64; no L x S buffer (peak memory); results repeat
// bit for bit; compiled (cudagraphs) against eager; where scaled_dot_product_attention takes it;
// errors. The dispatch tests run without a GPU (fake CUDA tensors); the rest skip without one.
#include <gtest/gtest.h>

#include <string>

#include "graphs/capture/fake.h"
#include "graphs/compile.h"
#include "graphs/testing/parity.h"
#include "ops/attention/efficient_attention.h"
#include "ops/attention/flash_attention.h"
#include "support/test_support.h"
#include "tensor/cuda_runtime.h"
#include "tensor/memory/cuda_memory.h"

namespace tg {
namespace {

using testing::expect_close;

Tensor fake_cuda(const Shape& s, DType dtype = kFloat32) { return graphs::fake_tensor(s, dtype, cuda_device(), false); }

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(EfficientAttentionDispatch, WhatTheKernelsTake) {
  const Tensor q = fake_cuda({2, 4, 77, 64}), k = fake_cuda({2, 4, 200, 64}), v = fake_cuda({2, 4, 200, 32});
  EXPECT_EQ(efficient_attention_blocker(q, k, v, Tensor(), 0.0), "");
  EXPECT_EQ(efficient_attention_blocker(fake_cuda({4, 9, 128}, kFloat64), fake_cuda({4, 3, 128}, kFloat64),
                                        fake_cuda({4, 3, 8}, kFloat64), Tensor(), 0.0),
            "");
  EXPECT_TRUE(has(efficient_attention_blocker(randn({2, 3, 4}), randn({2, 3, 4}), randn({2, 3, 4}), Tensor(), 0.0),
                  "runs on CUDA tensors, got the query on cpu"));
  const Tensor h = fake_cuda({2, 4, 77, 64}, kBFloat16);
  EXPECT_TRUE(has(efficient_attention_blocker(h, h, h, Tensor(), 0.0), "float32 or float64 operands, got bfloat16"));
  EXPECT_TRUE(has(efficient_attention_blocker(q, k, v, fake_cuda({77, 200}, kBool), 0.0), "a mask"));
  EXPECT_TRUE(has(efficient_attention_blocker(q, k, v, Tensor(), 0.1), "dropout"));
  EXPECT_TRUE(has(efficient_attention_blocker(fake_cuda({2, 4, 7, 160}), fake_cuda({2, 4, 7, 160}),
                                              fake_cuda({2, 4, 7, 160}), Tensor(), 0.0),
                  "head dims up to 128, got 160 and 160"));
  EXPECT_TRUE(has(efficient_attention_blocker(q, fake_cuda({1, 4, 200, 64}), fake_cuda({1, 4, 200, 32}), Tensor(), 0.0),
                  "batch dims"));
  EXPECT_TRUE(has(efficient_attention_blocker(fake_cuda({2, 4, 0, 64}), k, v, Tensor(), 0.0), "empty operands"));
}

TEST(EfficientAttentionDispatch, BadOperandsOfTheOpItself) {
  const Tensor q = fake_cuda({2, 4, 9, 64}, kFloat16);
  EXPECT_THROW_MSG(efficient_attention(q, q, q, 0.125, false),
                   "[efficient_attention] takes float32 or float64 operands, got float16");
  const Tensor f = fake_cuda({2, 4, 9, 64});
  EXPECT_THROW_MSG(efficient_attention(f, fake_cuda({2, 4, 9, 32}), f, 0.125, false),
                   "[efficient_attention] expected query [B, H, L, D], key [B, H, S, D] and value [B, H, S, Dv], got "
                   "[2, 4, 9, 64], [2, 4, 9, 32] and [2, 4, 9, 64]");
  EXPECT_THROW_MSG(efficient_attention(f, f, fake_cuda({2, 4, 9, 64}, kFloat64), 0.125, false),
                   "[efficient_attention] expected query, key and value of one dtype on one device");
}

// ---- on the GPU ---------------------------------------------------------------------------------

struct Case {
  int64_t B, H, L, S, D, Dv;
};

// Values and gradients of q, k, v against the composed path on the same operands.
void expect_matches_composed(const Case& c, DType dtype, bool causal, double tol) {
  SCOPED_TRACE(std::string(dtype_name(dtype)) + (causal ? " causal" : " full") + " B" + std::to_string(c.B) + " H" +
               std::to_string(c.H) + " L" + std::to_string(c.L) + " S" + std::to_string(c.S) + " D" +
               std::to_string(c.D) + " Dv" + std::to_string(c.Dv));
  const Device dev = cuda_device();
  const TensorOptions o{.dtype = dtype, .device = dev};
  const Tensor q0 = randn({c.B, c.H, c.L, c.D}, o), k0 = randn({c.B, c.H, c.S, c.D}, o),
               v0 = randn({c.B, c.H, c.S, c.Dv}, o), dout = randn({c.B, c.H, c.L, c.Dv}, o);
  auto run = [&](SdpaKernel kernel) {
    SdpaKernelGuard guard(kernel);
    const Tensor q = q0.detach().requires_grad_(true), k = k0.detach().requires_grad_(true),
                 v = v0.detach().requires_grad_(true);
    const Tensor out = scaled_dot_product_attention(q, k, v, Tensor(), 0.0, causal);
    out.backward(dout);
    return TensorList{out, q.grad(), k.grad(), v.grad()};
  };
  const TensorList got = run(SdpaKernel::kFused), want = run(SdpaKernel::kComposed);
  const char* names[] = {"output", "dq", "dk", "dv"};
  for (size_t i = 0; i < got.size(); ++i) {
    SCOPED_TRACE(names[i]);
    expect_close(got[i], want[i], tol, tol);
  }
}

TEST(EfficientAttentionCuda, MatchesTheComposedPath) {
  TG_REQUIRE_CUDA();
  manual_seed(31);
  const Case cases[] = {{2, 3, 5, 7, 16, 16},  {1, 2, 64, 64, 64, 64},   {2, 1, 129, 65, 32, 48},
                        {1, 2, 70, 200, 80, 80}, {1, 1, 150, 150, 128, 128}, {3, 2, 1, 1, 8, 8}};
  for (const Case& c : cases)
    for (bool causal : {false, true}) {
      expect_matches_composed(c, kFloat32, causal, 2e-5);
      expect_matches_composed(c, kFloat64, causal, 1e-11);
    }
}

TEST(EfficientAttentionCuda, ThreeDimOperandsAndLayouts) {
  TG_REQUIRE_CUDA();
  manual_seed(32);
  const Device dev = cuda_device();
  // [B, L, H, D] memory read as [B, H, L, D] (the heads of a projection, no copy), and 3-D operands.
  const Tensor qkv = randn({2, 37, 3, 4, 32}, {.device = dev});
  auto heads = [&](int64_t i) { return qkv.select(2, i).transpose(1, 2); };
  const Tensor three = randn({4, 37, 32}, {.device = dev});
  for (bool causal : {false, true}) {
    Tensor got, want, got3, want3;
    {
      SdpaKernelGuard on(SdpaKernel::kFused);
      got = scaled_dot_product_attention(heads(0), heads(1), heads(2), Tensor(), 0.0, causal);
      got3 = scaled_dot_product_attention(three, three, three, Tensor(), 0.0, causal);
    }
    SdpaKernelGuard off(SdpaKernel::kComposed);
    want = scaled_dot_product_attention(heads(0), heads(1), heads(2), Tensor(), 0.0, causal);
    want3 = scaled_dot_product_attention(three, three, three, Tensor(), 0.0, causal);
    expect_close(got, want, 2e-5, 2e-5);
    expect_close(got3, want3, 2e-5, 2e-5);
  }
}

// Finite differences on CPU float64 inputs, the op itself running on CUDA (the copies between are
// differentiable).
TEST(EfficientAttentionCuda, GradcheckInFloat64) {
  TG_REQUIRE_CUDA();
  manual_seed(33);
  for (bool causal : {false, true}) {
    const TensorList in{randn({1, 2, 5, 8}, {.dtype = kFloat64}).requires_grad_(true),
                        randn({1, 2, 7, 8}, {.dtype = kFloat64}).requires_grad_(true),
                        randn({1, 2, 7, 4}, {.dtype = kFloat64}).requires_grad_(true)};
    testing::expect_gradcheck(
        [causal](const TensorList& x) {
          const Tensor out = efficient_attention(x[0].cuda(), x[1].cuda(), x[2].cuda(), 0.35, causal).cpu();
          return out * out;
        },
        in);
  }
}

TEST(EfficientAttentionCuda, KeepsNoScoresOfSizeLTimesS) {
  TG_REQUIRE_CUDA();
  manual_seed(34);
  const Device dev = cuda_device();
  const int64_t B = 2, H = 4, T = 2048, D = 64;  // float32 scores would be 128 MiB
  const Tensor q = randn({B, H, T, D}, {.device = dev}).requires_grad_(true);
  const Tensor k = randn({B, H, T, D}, {.device = dev}).requires_grad_(true);
  const Tensor v = randn({B, H, T, D}, {.device = dev}).requires_grad_(true);
  const Tensor dout = randn({B, H, T, D}, {.device = dev});
  cuda::synchronize();
  const int64_t before = cuda::memory_allocated();
  cuda::reset_peak_memory_stats();
  scaled_dot_product_attention(q, k, v, Tensor(), 0.0, true).backward(dout);
  cuda::synchronize();
  const double peak_mib = static_cast<double>(cuda::max_memory_allocated() - before) / (1 << 20);
  // O (8 MiB), three gradients (24 MiB, perhaps copied once more where they are accumulated) and
  // per-row values; the composed path's scores and weights alone take 256 MiB.
  EXPECT_LT(peak_mib, 64.0);
}

TEST(EfficientAttentionCuda, GradientsRepeatBitForBit) {
  TG_REQUIRE_CUDA();
  manual_seed(35);
  const Device dev = cuda_device();
  const Tensor q = randn({2, 3, 300, 64}, {.device = dev}), k = randn({2, 3, 300, 64}, {.device = dev}),
               v = randn({2, 3, 300, 64}, {.device = dev}), dout = randn({2, 3, 300, 64}, {.device = dev});
  auto grads = [&] {
    const Tensor a = q.detach().requires_grad_(true), b = k.detach().requires_grad_(true),
                 c = v.detach().requires_grad_(true);
    scaled_dot_product_attention(a, b, c, Tensor(), 0.0, true).backward(dout);
    return TensorList{a.grad(), b.grad(), c.grad()};
  };
  const TensorList first = grads(), second = grads();
  for (size_t i = 0; i < 3; ++i) EXPECT_TRUE(equal(first[i], second[i])) << i;
}

// kAuto composes heads of fewer than 256 x 256 scores (exactly as kComposed does) and takes the
// kernels from there on.
TEST(EfficientAttentionCuda, AutoTakesTheKernelsForLargeHeads) {
  TG_REQUIRE_CUDA();
  manual_seed(37);
  const Device dev = cuda_device();
  for (int64_t T : {64, 255, 256}) {
    const Tensor q = randn({1, 2, T, 32}, {.device = dev}), k = randn({1, 2, T, 32}, {.device = dev});
    const Tensor a = scaled_dot_product_attention(q, k, k, Tensor(), 0.0, true);
    SdpaKernelGuard off(SdpaKernel::kComposed);
    const Tensor composed = scaled_dot_product_attention(q, k, k, Tensor(), 0.0, true);
    if (T < 256) expect_close(a, composed, 0.0, 0.0);
    else EXPECT_FALSE(equal(a, composed)) << "the kernels sum in another order than the composed path";
    expect_close(a, composed, 2e-5, 2e-5);
  }
}

TEST(EfficientAttentionCuda, CompiledWithCudagraphsMatchesEager) {
  TG_REQUIRE_CUDA();
  manual_seed(36);
  const Device dev = cuda_device();
  auto fn = [](const TensorList& in) {
    const Tensor a = scaled_dot_product_attention(in[0], in[1], in[2], Tensor(), 0.0, true);
    return TensorList{(a.transpose(1, 2).reshape({2, 256, 128}) * in[3]).square().sum()};
  };
  // 256 x 256 scores a head: kAuto's smallest for the kernels.
  const TensorList in{randn({2, 2, 256, 64}, {.device = dev}).requires_grad_(true),
                      randn({2, 2, 256, 64}, {.device = dev}).requires_grad_(true),
                      randn({2, 2, 256, 64}, {.device = dev}).requires_grad_(true), randn({2, 256, 128}, {.device = dev})};
  testing::expect_compiled_matches_eager(fn, in, {.compile = {.backend = "cudagraphs"}, .rtol = 1e-4, .atol = 1e-4,
                                                  .calls = 3});
  Compiled<decltype(fn)> compiled(fn, {.backend = "cudagraphs"});
  compiled(in)[0].backward();
  EXPECT_EQ(compiled.counters().forward_ops.count("efficient_attention"), 1u);
  EXPECT_EQ(compiled.counters().backward_ops.count("efficient_attention_backward"), 1u);
  EXPECT_EQ(compiled.counters().forward_ops.count("bmm"), 0u);
}

}  // namespace
}  // namespace tg
