// nn::GPT, the model of bench_gpt2: shapes, parameter count, GPT-2's initialization, a few AdamW
// steps that learn a fixed batch, compiled equal to eager, and clear errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <string>

#include "ops/random/random.h"
#include "support/test_support.h"
#include "tapegraph.h"

namespace tg {
namespace {

nn::GPTConfig tiny() { return {.vocab_size = 17, .context = 8, .d_model = 16, .heads = 2, .layers = 2}; }

int64_t parameter_count(nn::Module& m) {
  int64_t n = 0;
  for (const Tensor& p : m.parameters()) n += p.numel();
  return n;
}

TEST(GPT, ShapesAndParameterCount) {
  manual_seed(0);
  nn::GPT model(tiny());
  const Tensor idx = randint(0, 17, {3, 5});
  EXPECT_EQ(model.forward(idx).sizes(), (Shape{3, 5, 17}));
  // Embeddings V*d + T*d; per block 2 norms (4d), qkv d*3d+3d, out d*d+d, fc d*4d+4d, proj 4d*d+d;
  // final norm 2d; head d*V.
  const int64_t V = 17, T = 8, d = 16, L = 2;
  const int64_t block = 4 * d + (3 * d * d + 3 * d) + (d * d + d) + (4 * d * d + 4 * d) + (4 * d * d + d);
  EXPECT_EQ(parameter_count(model), V * d + T * d + L * block + 2 * d + d * V);
}

TEST(GPT, StartsWithGpt2Initialization) {
  manual_seed(0);
  nn::GPT model({.vocab_size = 2000, .context = 64, .d_model = 64, .heads = 4, .layers = 8});
  for (const auto& [name, p] : model.named_parameters()) {
    const Tensor x = p.to(kFloat64);
    const Tensor c = x - mean(x);
    const double std = sqrt(mean(c * c)).item<double>();
    if (name.find("ln_") != std::string::npos || name.find("bias") != std::string::npos) continue;
    // Residual projections are scaled by 1 / sqrt(2 * layers) = 1/4.
    const bool residual = name.ends_with("out.weight") || name.ends_with("proj.weight");
    EXPECT_NEAR(std, residual ? 0.005 : 0.02, residual ? 5e-4 : 1e-3) << name;
  }
}

TEST(GPT, SkippedDefaultDrawsLeaveEveryParameterAsBefore) {
  // GPT skips the default draws of the layers it draws again. Reference: the same layers built in
  // the same order with every default draw made, then drawn over as GPT does.
  const nn::GPTConfig c{.vocab_size = 37, .context = 9, .d_model = 16, .heads = 2, .layers = 3};
  manual_seed(12);
  nn::GPT model(c);
  const uint64_t offset = Generator::global().offset();
  const int64_t d = c.d_model;
  const double std = 0.02, residual_std = 0.02 / std::sqrt(2.0 * static_cast<double>(c.layers));
  auto draw_over = [](nn::Linear& l, double s) {
    nn::init::normal_(l.weight(), 0.0, s);
    if (l.bias().defined()) nn::init::zeros_(l.bias());
  };
  manual_seed(12);
  std::map<std::string, Tensor> expected;
  nn::Embedding wte(c.vocab_size, d, std::nullopt), wpe(c.context, d, std::nullopt);
  for (int64_t i = 0; i < c.layers; ++i) {
    nn::Linear qkv(d, 3 * d), out(d, d), fc(d, 4 * d), proj(4 * d, d);
    draw_over(qkv, std);
    draw_over(fc, std);
    draw_over(out, residual_std);
    draw_over(proj, residual_std);
    const std::string h = "h." + std::to_string(i) + ".";
    for (auto [name, l] : {std::pair{"qkv", &qkv}, {"out", &out}, {"fc", &fc}, {"proj", &proj}}) {
      expected[h + name + ".weight"] = l->weight();
      expected[h + name + ".bias"] = l->bias();
    }
  }
  nn::Linear lm_head(d, c.vocab_size, false);
  nn::init::normal_(wte.weight(), 0.0, std);
  nn::init::normal_(wpe.weight(), 0.0, std);
  draw_over(lm_head, std);
  expected["wte.weight"] = wte.weight();
  expected["wpe.weight"] = wpe.weight();
  expected["lm_head.weight"] = lm_head.weight();
  EXPECT_EQ(Generator::global().offset(), offset);
  size_t compared = 0;
  for (const auto& [name, p] : model.named_parameters()) {
    const auto it = expected.find(name);
    if (it == expected.end()) continue;
    ++compared;
    const Tensor x = p.contiguous(), y = it->second.contiguous();
    ASSERT_EQ(x.sizes(), y.sizes()) << name;
    EXPECT_EQ(std::memcmp(x.raw_data(), y.raw_data(), static_cast<size_t>(x.numel()) * sizeof(float)), 0) << name;
  }
  EXPECT_EQ(compared, expected.size());
}

TEST(GPT, AdamWLearnsAFixedBatch) {
  manual_seed(0);
  nn::GPT model(tiny());
  optim::AdamW opt(model.parameters(), {.lr = 3e-3, .weight_decay = 0.0});
  const Tensor idx = randint(0, 17, {4, 8}), targets = randint(0, 17, {4, 8});
  const double first = model.loss(idx, targets).item<double>();
  EXPECT_NEAR(first, std::log(17.0), 0.2);  // small initial weights: nearly uniform predictions
  double last = first;
  for (int i = 0; i < 60; ++i) {
    opt.zero_grad();
    Tensor l = model.loss(idx, targets);
    l.backward();
    opt.step();
    last = l.item<double>();
  }
  EXPECT_LT(last, 0.5 * first);
}

TEST(GPT, CompiledLossAndGradientsEqualEager) {
  manual_seed(0);
  nn::GPT model(tiny());
  const Tensor idx = randint(0, 17, {2, 8}), targets = randint(0, 17, {2, 8});
  auto fn = [&](const Tensor& a, const Tensor& b) { return model.loss(a, b); };
  auto compiled = compile(fn, {.backend = "aot_eager"});
  Tensor le = fn(idx, targets);
  le.backward();
  TensorList eager_grads;
  for (const Tensor& p : model.parameters()) eager_grads.push_back(p.grad().clone());
  model.zero_grad();
  for (int call = 0; call < 2; ++call) {
    model.zero_grad();
    Tensor lc = compiled(idx, targets);
    testing::expect_close(lc, le, 1e-6, 1e-6);
    lc.backward();
  }
  const TensorList params = model.parameters();
  for (size_t i = 0; i < params.size(); ++i) testing::expect_close(params[i].grad(), eager_grads[i], 1e-5, 1e-6);
}

// fused_ops = false writes the same model with plain ops: the same loss and gradients eagerly, and
// compiled with the LM-head rewrite on (its limit at 1 byte) the compiler puts linear_cross_entropy
// back in and still matches.
TEST(GPT, PlainOpsVariantEqualsFusedOps) {
  const Tensor idx = randint(0, 17, {2, 8}), targets = randint(0, 17, {2, 8});
  auto run = [&](bool fused, bool compiled) {
    manual_seed(0);
    nn::GPTConfig config = tiny();
    config.fused_ops = fused;
    nn::GPT model(config, {.dtype = kFloat64});
    auto fn = [&](const Tensor& a, const Tensor& b) { return model.loss(a, b); };
    auto c = compile(fn, {.backend = "aot_eager", .fuse_linear_cross_entropy_bytes = 1});
    const Tensor loss = compiled ? c(idx, targets) : fn(idx, targets);
    loss.backward();
    TensorList r{loss.detach()};
    for (const Tensor& p : model.parameters()) r.push_back(p.grad());
    if (compiled && !fused) EXPECT_EQ(c.counters().forward_ops.count("cross_entropy"), 0u);
    return r;
  };
  const TensorList want = run(true, false);
  for (const auto& [fused, compiled] : {std::pair{false, false}, std::pair{false, true}, std::pair{true, true}}) {
    SCOPED_TRACE(::testing::Message() << (fused ? "fused" : "plain") << (compiled ? ", compiled" : ""));
    const TensorList got = run(fused, compiled);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) testing::expect_close(got[i], want[i], 1e-10, 1e-12);
  }
}

TEST(GPT, ClearErrors) {
  nn::GPT model(tiny());
  EXPECT_THROW_MSG(model.forward(randint(0, 17, {2, 9})), "longer than the context of 8");
  EXPECT_THROW_MSG(model.forward(randint(0, 17, {9})), "expected token ids [B, T]");
  EXPECT_THROW_MSG(model.loss(randint(0, 17, {2, 4}), randint(0, 17, {2, 5})), "do not match token ids");
  EXPECT_THROW_MSG(nn::GPT({.d_model = 10, .heads = 3}), "not a multiple of heads");
}

}  // namespace
}  // namespace tg
