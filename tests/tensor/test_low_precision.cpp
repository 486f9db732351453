// float16 and bfloat16: element conversions, dtype rules, ops against float32 references on the CPU
// and CUDA, float accumulation, autocast (casts, gradients, compile guards) and the TF32 switch.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "support/test_support.h"

namespace tg {
namespace {

using testing::expect_close;
using testing::random_tensor;

uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

TEST(HalfConversion, EveryFiniteHalfRoundTripsThroughFloat) {
  for (uint32_t b = 0; b < 0x10000; ++b) {
    const Half h = Half::from_bits(static_cast<uint16_t>(b));
    const float f = h;
    if (std::isnan(f)) {
      EXPECT_TRUE((b & 0x7c00) == 0x7c00 && (b & 0x3ff) != 0) << b;
      EXPECT_TRUE(std::isnan(static_cast<float>(Half(f))));
      continue;
    }
    ASSERT_EQ(Half(f).bits, b) << "half bits " << b << " -> " << f;
  }
}

TEST(HalfConversion, EveryFiniteBFloat16RoundTripsThroughFloat) {
  for (uint32_t b = 0; b < 0x10000; ++b) {
    const BFloat16 h = BFloat16::from_bits(static_cast<uint16_t>(b));
    const float f = h;
    ASSERT_EQ(float_bits(f), b << 16);
    if (std::isnan(f)) continue;
    ASSERT_EQ(BFloat16(f).bits, b);
  }
}

TEST(HalfConversion, RoundsToNearestEvenWithSubnormalsAndOverflow) {
  EXPECT_EQ(static_cast<float>(Half(1.0f + std::ldexp(1.0f, -11))), 1.0f);  // tie: to even
  EXPECT_EQ(static_cast<float>(Half(1.0f + 3 * std::ldexp(1.0f, -11))), 1.0f + std::ldexp(1.0f, -9));
  EXPECT_EQ(static_cast<float>(Half(65519.0f)), 65504.0f);
  EXPECT_TRUE(std::isinf(static_cast<float>(Half(65520.0f))));
  EXPECT_TRUE(std::isinf(static_cast<float>(Half(-1e9f))));
  EXPECT_EQ(static_cast<float>(Half(std::ldexp(1.0f, -24))), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_EQ(static_cast<float>(Half(std::ldexp(1.0f, -25))), 0.0f);                    // tie: to even (0)
  EXPECT_EQ(static_cast<float>(Half(3 * std::ldexp(1.0f, -26))), std::ldexp(1.0f, -24));
  EXPECT_EQ(static_cast<float>(BFloat16(1.0f + std::ldexp(1.0f, -8))), 1.0f);  // tie: to even
  EXPECT_EQ(static_cast<float>(BFloat16(1.0f + 3 * std::ldexp(1.0f, -8))), 1.0f + std::ldexp(1.0f, -6));
  EXPECT_EQ(static_cast<float>(std::numeric_limits<Half>::max()), 65504.0f);
  EXPECT_EQ(static_cast<float>(std::numeric_limits<BFloat16>::lowest()), -std::numeric_limits<BFloat16>::max());
  EXPECT_EQ(static_cast<float>(std::numeric_limits<BFloat16>::epsilon()), std::ldexp(1.0f, -7));
}

TEST(LowPrecisionDtype, NamesSizesAndPromotion) {
  EXPECT_EQ(dtype_name(kBFloat16), "bfloat16");
  EXPECT_EQ(dtype_name(kFloat16), "float16");
  EXPECT_EQ(dtype_size(kBFloat16), 2);
  EXPECT_TRUE(is_floating(kFloat16));
  EXPECT_EQ(promote_types(kBFloat16, kFloat16), kFloat32);
  EXPECT_EQ(promote_types(kBFloat16, kFloat32), kFloat32);
  EXPECT_EQ(promote_types(kInt64, kBFloat16), kBFloat16);
  EXPECT_EQ(promote_types(kFloat16, kFloat64), kFloat64);
  const Tensor x = ones({2}, {.dtype = kBFloat16});
  EXPECT_EQ(add(x, 1.5).dtype(), kBFloat16);  // a float scalar keeps the tensor's dtype
  EXPECT_EQ(add(x, ones({2})).dtype(), kFloat32);
  EXPECT_NE(x.to_string().find("dtype=torch.bfloat16"), std::string::npos) << x.to_string();
}

TEST(LowPrecisionOps, ElementwiseMatchFloat32WithinRounding) {
  const Tensor a = random_tensor({37, 19}, kFloat32, false, -2, 2), b = random_tensor({37, 19}, kFloat32, false, 0.5, 2);
  for (DType d : {kBFloat16, kFloat16}) {
    const double tol = d == kBFloat16 ? 1e-2 : 2e-3;
    const Tensor al = a.to(d), bl = b.to(d);
    const Tensor af = al.to(kFloat32), bf = bl.to(kFloat32);  // the same inputs, exactly
    for (auto fn : std::vector<std::function<Tensor(const Tensor&, const Tensor&)>>{
             [](const Tensor& x, const Tensor& y) { return add(x, y); },
             [](const Tensor& x, const Tensor& y) { return mul(x, y); },
             [](const Tensor& x, const Tensor& y) { return div(x, y); },
             [](const Tensor& x, const Tensor&) { return gelu(x); },
             [](const Tensor& x, const Tensor&) { return tanh(x); },
             [](const Tensor& x, const Tensor&) { return relu(x); },
             [](const Tensor& x, const Tensor& y) { return sigmoid(mul(x, y)); }}) {
      const Tensor low = fn(al, bl);
      EXPECT_EQ(low.dtype(), d);
      expect_close(low.to(kFloat32), fn(af, bf), tol, tol);
    }
  }
}

TEST(LowPrecisionOps, ReductionsAccumulateInFloat) {
  // Past 256, bfloat16 cannot count by ones: a bfloat16 accumulator would stop there.
  EXPECT_EQ(sum(ones({4096}, {.dtype = kBFloat16})).item<float>(), 4096.0f);
  EXPECT_EQ(mean(ones({3000}, {.dtype = kFloat16})).item<float>(), 1.0f);
  const Tensor x = random_tensor({64, 300}, kFloat32).to(kBFloat16);
  expect_close(sum(x, {1}).to(kFloat32), sum(x.to(kFloat32), {1}), 1e-2, 1e-2);
  expect_close(var(x, {1}).to(kFloat32), var(x.to(kFloat32), {1}), 1e-2, 1e-3);
  expect_close(amax(x, {0}).to(kFloat32), amax(x.to(kFloat32), {0}), 0, 0);
}

TEST(LowPrecisionOps, ProductsSoftmaxLossesAndNormsMatchFloat32) {
  const Tensor a = random_tensor({33, 70}, kFloat32).to(kBFloat16), w = random_tensor({20, 70}, kFloat32).to(kBFloat16);
  const Tensor bias = random_tensor({20}, kFloat32).to(kBFloat16);
  const Tensor y = linear(a, w, bias);
  EXPECT_EQ(y.dtype(), kBFloat16);
  expect_close(y.to(kFloat32), linear(a.to(kFloat32), w.to(kFloat32), bias.to(kFloat32)), 1e-2, 2e-2);
  expect_close(softmax(y, 1).to(kFloat32), softmax(y.to(kFloat32), 1), 1e-2, 1e-3);
  const Tensor target = randint(0, 20, {33});
  expect_close(cross_entropy(y, target).to(kFloat32), cross_entropy(y.to(kFloat32), target), 1e-2, 1e-2);
  expect_close(layer_norm(y, {20}).to(kFloat32), layer_norm(y.to(kFloat32), {20}), 2e-2, 2e-2);
  const Tensor img = random_tensor({2, 3, 8, 8}, kFloat32).to(kFloat16), k = random_tensor({4, 3, 3, 3}, kFloat32).to(kFloat16);
  expect_close(conv2d(img, k).to(kFloat32), conv2d(img.to(kFloat32), k.to(kFloat32)), 5e-3, 5e-3);
}

// 16-bit products on the CPU widen their operands to float: only the elements the rows hold, not
// whole leading dimensions, so an operand whose last row ends its storage early is read within it
// (AddressSanitizer caught the widening reading past a narrowed view's storage).
TEST(LowPrecisionOps, ProductsOfNarrowViewsReadOnlyTheirRows) {
  for (DType dt : {kBFloat16, kFloat16}) {
    // [2, 4] at columns 12-15 of the last two rows of a [4, 16]: it ends at the storage's last element.
    const Tensor b = random_tensor({4, 16}, kFloat32).to(dt).narrow(1, 12, 4).narrow(0, 2, 2);
    const Tensor a = random_tensor({3, 4}, kFloat32).to(dt);
    expect_close(a.matmul(b.t()).to(kFloat32), a.to(kFloat32).matmul(b.to(kFloat32).t()), 1e-2, 1e-2);
    expect_close(b.matmul(a.t()).to(kFloat32), b.to(kFloat32).matmul(a.to(kFloat32).t()), 1e-2, 1e-2);
    // Batched: the last matrix's last row ends its storage early too.
    const Tensor bb = random_tensor({2, 3, 16}, kFloat32).to(dt).narrow(2, 12, 4);
    const Tensor ab = random_tensor({2, 5, 3}, kFloat32).to(dt);
    expect_close(ab.matmul(bb).to(kFloat32), ab.to(kFloat32).matmul(bb.to(kFloat32)), 1e-2, 1e-2);
  }
}

TEST(LowPrecisionOps, BatchNormOfAHalfInputWithFloat32Statistics) {
  const Tensor x = random_tensor({8, 3, 4, 4}, kFloat32).to(kBFloat16);
  Tensor rm = zeros({3}), rv = ones({3}), rm32 = zeros({3}), rv32 = ones({3});
  const Tensor w = ones({3}), b = zeros({3});
  const Tensor y = batch_norm(x, rm, rv, w, b, true, 0.1, 1e-5);
  EXPECT_EQ(y.dtype(), kBFloat16);
  expect_close(y.to(kFloat32), batch_norm(x.to(kFloat32), rm32, rv32, w, b, true, 0.1, 1e-5), 2e-2, 2e-2);
  expect_close(rm, rm32, 1e-6, 1e-7);  // statistics stay float32 and see the same values
}

TEST(LowPrecisionOps, GradientsFlowBackThroughCastsInEachLeafsDtype) {
  Tensor w = random_tensor({5, 4}, kFloat32, true);
  const Tensor x = random_tensor({3, 4}, kFloat32);
  const Tensor loss = sum(mul(mm(x.to(kBFloat16), w.to(kBFloat16).t()), 2.0));
  loss.backward();
  ASSERT_TRUE(w.grad().defined());
  EXPECT_EQ(w.grad().dtype(), kFloat32);
  // d/dw sum(2 x w^T) = 2 * column sums of x, for every row of w.
  const Tensor expected = mul(sum(x.to(kBFloat16).to(kFloat32), {0}, true), 2.0).expand({5, 4});
  expect_close(w.grad(), expected, 1e-2, 1e-2);
}

TEST(LowPrecisionOps, ModuleToDtypeConvertsFloatingTensorsInPlace) {
  nn::Sequential model{std::make_shared<nn::Linear>(6, 4), std::make_shared<nn::BatchNorm1d>(4)};
  const Tensor weight = model.parameters()[0];
  const Tensor w32 = weight.detach().clone();
  model.to(kBFloat16);
  EXPECT_TRUE(model.parameters()[0].is_same(weight));  // the same handle, now bfloat16
  EXPECT_EQ(weight.dtype(), kBFloat16);
  expect_close(weight.detach().to(kFloat32), w32, 1e-2, 1e-2);
  for (const auto& [name, b] : model.named_buffers())
    EXPECT_EQ(b.dtype(), name.find("num_batches_tracked") != std::string::npos ? kInt64 : kBFloat16) << name;
  const Tensor y = model(random_tensor({5, 6}, kFloat32).to(kBFloat16));
  EXPECT_EQ(y.dtype(), kBFloat16);
  sum(y.to(kFloat32)).backward();
  EXPECT_EQ(weight.grad().dtype(), kBFloat16);
  EXPECT_THROW_MSG(model.to(kInt64), "expected a floating dtype, got int64");
}

TEST(LowPrecisionOps, CudaMatchesCpu) {
  TG_REQUIRE_CUDA();
  for (DType d : {kBFloat16, kFloat16}) {
    const Tensor a = random_tensor({65, 130}, kFloat32).to(d), w = random_tensor({40, 130}, kFloat32).to(d);
    const Tensor bias = random_tensor({40}, kFloat32).to(d);
    auto step = [](const Tensor& x, const Tensor& wt, const Tensor& b) {
      const Tensor h = relu(linear(x, wt, b));
      return std::vector<Tensor>{h, sum(h, {0}), softmax(h, 1), gelu(h), amax(h, {1}), mean(h)};
    };
    const auto cpu = step(a, w, bias);
    const auto gpu = step(a.to(cuda_device()), w.to(cuda_device()), bias.to(cuda_device()));
    for (size_t i = 0; i < cpu.size(); ++i) {
      EXPECT_EQ(gpu[i].dtype(), cpu[i].dtype()) << i;
      expect_close(gpu[i].to(kCPU).to(kFloat32), cpu[i].to(kFloat32), 2e-2, 2e-2);
    }
    const Tensor img = random_tensor({2, 3, 9, 9}, kFloat32).to(d), k = random_tensor({5, 3, 3, 3}, kFloat32).to(d);
    expect_close(conv2d(img.to(cuda_device()), k.to(cuda_device())).to(kCPU).to(kFloat32),
                 conv2d(img, k).to(kFloat32), 1e-2, 1e-2);
  }
}

TEST(Autocast, CastsByOpListAndRestoresOnExit) {
  const Tensor x = random_tensor({4, 8}, kFloat32), w = random_tensor({3, 8}, kFloat32);
  {
    AutocastGuard amp(kCPU, kBFloat16);
    EXPECT_EQ(autocast_state(), "cpu:bfloat16");
    const Tensor y = linear(x, w);
    EXPECT_EQ(y.dtype(), kBFloat16);                      // low-precision list
    EXPECT_EQ(mse_loss(y, y).dtype(), kFloat32);          // float32 list
    EXPECT_EQ(softmax(y, 1).dtype(), kBFloat16);          // on CUDA's float32 list only, as in PyTorch
    EXPECT_EQ(relu(y).dtype(), kBFloat16);                // everything else: the input's dtype
    EXPECT_EQ(add(y, x.narrow(1, 0, 3)).dtype(), kFloat32);  // promotion
    EXPECT_EQ(mm(x.to(kFloat64), w.to(kFloat64).t()).dtype(), kFloat64);  // float64 is never cast
    {
      AutocastGuard off(kCPU, kBFloat16, false);
      EXPECT_EQ(linear(x, w).dtype(), kFloat32);
    }
    EXPECT_EQ(linear(x, w).dtype(), kBFloat16);
  }
  EXPECT_EQ(autocast_state(), "off");
  EXPECT_EQ(linear(x, w).dtype(), kFloat32);
  EXPECT_THROW_MSG(AutocastGuard(kCPU, kFloat32), "[autocast] expected float16 or bfloat16, got float32");
}

TEST(Autocast, BackwardRunsInTheForwardsDtypesAndGivesFloat32Grads) {
  nn::Linear layer(8, 3);
  const Tensor x = random_tensor({4, 8}, kFloat32);
  Tensor loss;
  {
    AutocastGuard amp(kCPU, kBFloat16);
    loss = cross_entropy(layer.forward(x), tensor<int64_t>({0, 1, 2, 0}));
    EXPECT_EQ(loss.dtype(), kFloat32);
    loss.backward();  // inside the guard: the backward's products must not be cast again
  }
  for (const Tensor& p : layer.parameters()) {
    ASSERT_TRUE(p.grad().defined());
    EXPECT_EQ(p.grad().dtype(), kFloat32);
  }
}

TEST(Autocast, CompiledFunctionsRecompileWhenTheAutocastStateChanges) {
  const Tensor x = random_tensor({4, 8}, kFloat32), w = random_tensor({3, 8}, kFloat32);
  auto fn = compile([&](const Tensor& in) { return linear(in, w); }, {.backend = "aot_eager"});
  graphs::reset_global_counters();
  const Tensor plain = fn(x);
  Tensor low;
  {
    AutocastGuard amp(kCPU, kBFloat16);
    low = fn(x);
  }
  EXPECT_EQ(plain.dtype(), kFloat32);
  EXPECT_EQ(low.dtype(), kBFloat16);
  EXPECT_EQ(graphs::global_counters().recompiles, 1);
  expect_close(low.to(kFloat32), plain, 2e-2, 2e-2);
}

TEST(Tf32, SwitchIsOffByDefaultAndGivesFloat32ProductsWhenOff) {
  EXPECT_FALSE(allow_tf32());
  TG_REQUIRE_CUDA();
  // 1 + 2^-12 is exact in float32 but not in TF32 (10 mantissa bits): products keep it only when off.
  const Tensor a = full({16, 16}, 1.0 + std::ldexp(1.0, -12)).to(cuda_device());
  Tensor b = zeros({16, 16});
  for (int64_t i = 0; i < 16; ++i) b.select(0, i).select(0, i).fill_(1.0);
  b = b.to(cuda_device());
  EXPECT_EQ(mm(a, b).to(kCPU).amax().item<float>(), 1.0f + std::ldexp(1.0f, -12));
  set_allow_tf32(true);
  const float with_tf32 = mm(a, b).to(kCPU).amax().item<float>();
  set_allow_tf32(false);
  EXPECT_EQ(with_tf32, 1.0f);
}

}  // namespace
}  // namespace tg
