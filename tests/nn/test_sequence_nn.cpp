// Embedding, LSTM, GRU and MultiheadAttention modules: PyTorch's parameter names, shapes and init
// ranges, layouts (batch_first, bidirectional), initial states, dropout between layers, and errors.
#include <gtest/gtest.h>

#include <cmath>

#include "graphs/capture/joint.h"
#include "graphs/testing/parity.h"
#include "support/test_support.h"
#include "support/values.h"

namespace tg {
namespace {

using testing::expect_close;
using testing::random_tensor;

TEST(LstmModule, ParameterNamesShapesAndInitRange) {
  nn::LSTM lstm(10, 6, {.num_layers = 2, .bidirectional = true});
  const std::vector<std::pair<std::string, Shape>> expected{
      {"weight_ih_l0", {24, 10}}, {"weight_hh_l0", {24, 6}}, {"bias_ih_l0", {24}}, {"bias_hh_l0", {24}},
      {"weight_ih_l0_reverse", {24, 10}}, {"weight_hh_l0_reverse", {24, 6}}, {"bias_ih_l0_reverse", {24}},
      {"bias_hh_l0_reverse", {24}}, {"weight_ih_l1", {24, 12}}, {"weight_hh_l1", {24, 6}}, {"bias_ih_l1", {24}},
      {"bias_hh_l1", {24}}, {"weight_ih_l1_reverse", {24, 12}}, {"weight_hh_l1_reverse", {24, 6}},
      {"bias_ih_l1_reverse", {24}}, {"bias_hh_l1_reverse", {24}}};
  const auto params = lstm.named_parameters();
  ASSERT_EQ(params.size(), expected.size());
  const double bound = 1.0 / std::sqrt(6.0);
  for (size_t i = 0; i < params.size(); ++i) {
    EXPECT_EQ(params[i].first, expected[i].first);
    EXPECT_EQ(params[i].second.sizes(), expected[i].second) << params[i].first;
    EXPECT_TRUE(params[i].second.requires_grad());
    EXPECT_LE(params[i].second.abs().amax().item<float>(), bound) << params[i].first;
  }
  EXPECT_EQ(lstm.to_string(), "LSTM(10, 6, num_layers=2, bidirectional=True)");
  nn::GRU gru(4, 3, {.bias = false});
  ASSERT_EQ(gru.named_parameters().size(), 2u);
  EXPECT_EQ(gru.named_parameters()[0].second.sizes(), (Shape{9, 4}));
}

TEST(LstmModule, OutputsStatesAndLayouts) {
  manual_seed(3);
  nn::LSTM lstm(5, 4, {.num_layers = 2, .bidirectional = true}, {.dtype = kFloat64});
  Tensor x = random_tensor({7, 3, 5});
  nn::RnnOutput r = lstm.forward_with_state(x);
  EXPECT_EQ(r.output.sizes(), (Shape{7, 3, 8}));
  EXPECT_EQ(r.h_n.sizes(), (Shape{4, 3, 4}));
  EXPECT_EQ(r.c_n.sizes(), (Shape{4, 3, 4}));
  // The last layer's forward final state is the output's last step, the reverse one its first step.
  expect_close(r.h_n.select(0, 2), r.output.select(0, 6).narrow(1, 0, 4));
  expect_close(r.h_n.select(0, 3), r.output.select(0, 0).narrow(1, 4, 4));
  // Zero initial states equal the default.
  Tensor z = zeros({4, 3, 4}, {.dtype = kFloat64});
  expect_close(lstm.forward_with_state(x, z, z).output, r.output);
  // A nonzero h0 changes the result.
  EXPECT_GT((lstm.forward_with_state(x, ones({4, 3, 4}, {.dtype = kFloat64}), z).output - r.output).abs().amax()
                .item<double>(),
            1e-6);

  // batch_first reads [B, T, I] with the same parameters.
  nn::LSTM bf(5, 4, {.num_layers = 2, .batch_first = true, .bidirectional = true}, {.dtype = kFloat64});
  auto pb = bf.parameters();
  auto pl = lstm.parameters();
  for (size_t i = 0; i < pb.size(); ++i) pb[i].detach().copy_(pl[i].detach());
  expect_close(bf.forward_with_state(x.transpose(0, 1)).output, r.output.transpose(0, 1));
  EXPECT_THROW_MSG(lstm.forward_with_state(random_tensor({7, 3, 6})), "input.size(-1) must be equal to input_size. "
                   "Expected 5, got 6");
  EXPECT_THROW_MSG(lstm.forward_with_state(x, zeros({2, 3, 4}, {.dtype = kFloat64})),
                   "Expected hidden size [4, 3, 4], got [2, 3, 4]");
  EXPECT_THROW_MSG(lstm.forward_with_state(random_tensor({1, 3, 3, 5})), "Expected input to be 2D or 3D, got 4D");
}

TEST(LstmModule, GradientsReachEveryParameterAndDropoutOnlyBetweenLayers) {
  manual_seed(4);
  nn::LSTM lstm(3, 2, {.num_layers = 2, .dropout = 0.5}, {.dtype = kFloat64});
  Tensor x = random_tensor({4, 2, 3});
  lstm.eval();
  Tensor a = lstm(x), b = lstm(x);
  expect_close(a, b);  // eval: no dropout, deterministic
  lstm.train();
  lstm(x).sum().backward();
  for (const auto& [name, p] : lstm.named_parameters()) EXPECT_TRUE(p.grad().defined()) << name;
  nn::LSTM one(3, 2, {.num_layers = 1, .dropout = 0.5}, {.dtype = kFloat64});
  expect_close(one(x), one(x));  // one layer: dropout never applies (as PyTorch)
}

TEST(GruModule, MatchesTheLayerFunction) {
  manual_seed(5);
  nn::GRU gru(3, 2, {.bidirectional = true}, {.dtype = kFloat64});
  Tensor x = random_tensor({4, 2, 3});
  nn::RnnOutput r = gru.forward_with_state(x);
  EXPECT_FALSE(r.c_n.defined());
  auto p = gru.parameters();
  Tensor h0 = zeros({2, 2}, {.dtype = kFloat64});
  RnnLayerResult fw = gru_layer(x, h0, p[0], p[1], p[2], p[3]);
  RnnLayerResult bw = gru_layer(x, h0, p[4], p[5], p[6], p[7], true);
  expect_close(r.output, cat({fw.output, bw.output}, 2));
  expect_close(r.h_n, stack({fw.h, bw.h}, 0));
  testing::expect_gradcheck(
      [&](const TensorList& in) { return gru.forward_with_state(in[0]).output; }, {random_tensor({3, 2, 3}, kFloat64, true)});
}

TEST(EmbeddingModule, LooksUpRowsAndZeroesThePaddingRow) {
  nn::Embedding emb(6, 3, 2);
  EXPECT_EQ(emb.weight().sizes(), (Shape{6, 3}));
  testing::expect_values(emb.weight().select(0, 2), {0, 0, 0});
  Tensor idx = from_vector<int64_t>({1, 2, 5}, {3});
  Tensor out = emb(idx);
  EXPECT_EQ(out.sizes(), (Shape{3, 3}));
  expect_close(out.select(0, 2), emb.weight().detach().select(0, 5));
  out.sum().backward();
  testing::expect_values(emb.weight().grad().select(0, 2), {0, 0, 0});
  EXPECT_EQ(emb.to_string(), "Embedding(6, 3, padding_idx=2)");
  EXPECT_THROW_MSG(nn::Embedding(4, 2, 4), "padding_idx 4 must be within num_embeddings (4)");
}

TEST(MultiheadAttentionModule, MatchesAHandWrittenComputation) {
  manual_seed(6);
  nn::MultiheadAttention mha(4, 2, 0.0, true, false, {.dtype = kFloat64});
  EXPECT_EQ(mha.named_parameters().size(), 4u);
  EXPECT_EQ(mha.named_parameters()[0].first, "in_proj_weight");
  EXPECT_EQ(mha.named_parameters()[2].first, "out_proj.weight");
  Tensor x = random_tensor({3, 2, 4});  // [L, N, E]
  Tensor out = mha.attend(x, x, x, Tensor(), true);
  EXPECT_EQ(out.sizes(), (Shape{3, 2, 4}));
  // Reference: per batch and head, softmax(q k^T / sqrt(2) + causal) v, then out_proj.
  Tensor w = mha.parameter("in_proj_weight").detach(), b = mha.parameter("in_proj_bias").detach();
  Tensor ow = mha.parameter("out_proj.weight").detach(), ob = mha.parameter("out_proj.bias").detach();
  for (int64_t n = 0; n < 2; ++n) {
    Tensor xn = x.select(1, n);  // [L, E]
    Tensor qkv = linear(xn, w, b);
    TensorList heads;
    for (int64_t h = 0; h < 2; ++h) {
      Tensor q = qkv.narrow(1, h * 2, 2), k = qkv.narrow(1, 4 + h * 2, 2), v = qkv.narrow(1, 8 + h * 2, 2);
      Tensor s = matmul(q, k.t()) / std::sqrt(2.0);
      s = masked_fill(s, ne(triu(ones({3, 3}, {.dtype = kInt64}), 1), 0), -INFINITY);
      heads.push_back(matmul(softmax(s, 1), v));
    }
    expect_close(out.select(1, n), linear(cat(heads, 1), ow, ob), 1e-10, 1e-12);
  }
  nn::MultiheadAttention bf(4, 2, 0.0, true, true, {.dtype = kFloat64});
  EXPECT_EQ(bf(random_tensor({2, 5, 4})).sizes(), (Shape{2, 5, 4}));
  EXPECT_THROW_MSG(nn::MultiheadAttention(6, 4), "embed_dim must be divisible by num_heads, got 6 and 4");
  EXPECT_THROW_MSG(mha.attend(random_tensor({3, 2, 5}), x, x), "last dim 4 (embed_dim), got shape [3, 2, 5]");
}

TEST(SequenceModules, CompiledMatchesEager) {
  manual_seed(7);
  auto emb = std::make_shared<nn::Embedding>(11, 4, 0, TensorOptions{.dtype = kFloat64});
  auto gru = std::make_shared<nn::GRU>(4, 3, nn::RnnOptions{.batch_first = true}, TensorOptions{.dtype = kFloat64});
  auto fn = [emb, gru](const TensorList& in) { return TensorList{gru->forward(emb->forward(in[0])).sum() * in[1]}; };
  testing::expect_compiled_matches_eager(
      fn, {from_vector<int64_t>({1, 0, 3, 10, 2, 2}, {2, 3}), random_tensor({1}, kFloat64, true)},
      {.compile = {.backend = "aot_eager"}});
}

std::shared_ptr<nn::RnnBase> make_rnn(bool lstm, int64_t in, int64_t hidden, nn::RnnOptions opts) {
  if (lstm) return std::make_shared<nn::LSTM>(in, hidden, opts);
  return std::make_shared<nn::GRU>(in, hidden, opts);
}

// Output, h_n, c_n and every parameter's gradient of a weighted loss.
TensorList module_values_and_grads(nn::RnnBase& m, const Tensor& input) {
  const nn::RnnOutput r = m.forward_with_state(input);
  Tensor loss = (r.output * r.output).sum() + r.h_n.sum() * 0.5;
  if (r.c_n.defined()) loss = loss + (r.c_n * 0.25).sum();
  loss.backward();
  TensorList out{r.output.detach(), r.h_n.detach()};
  if (r.c_n.defined()) out.push_back(r.c_n.detach());
  for (const auto& [name, p] : m.named_parameters()) out.push_back(p.grad());
  return out;
}

// The modules on CUDA (one cuDNN op) against the same modules on the CPU, batch_first or not, on a
// non-contiguous input.
TEST(RnnModules, CudaMatchesCpu) {
  TG_REQUIRE_CUDA();
  for (const bool lstm : {true, false}) {
    for (const bool batch_first : {false, true}) {
      SCOPED_TRACE(std::string(lstm ? "LSTM" : "GRU") + (batch_first ? " batch_first" : ""));
      const nn::RnnOptions opts{.num_layers = 2, .batch_first = batch_first, .bidirectional = true};
      manual_seed(11);
      auto cpu = make_rnn(lstm, 5, 4, opts);
      manual_seed(11);
      auto gpu = make_rnn(lstm, 5, 4, opts);
      gpu->to(cuda_device());
      const Tensor stored = random_tensor({5, 3, 7}, kFloat32);  // read as [7, 3, 5] or [3, 7, 5]
      const Tensor x = batch_first ? stored.permute({1, 2, 0}) : stored.permute({2, 1, 0});
      ASSERT_FALSE(x.is_contiguous());
      const TensorList want = module_values_and_grads(*cpu, x);
      const TensorList got = module_values_and_grads(*gpu, (batch_first ? stored.to(cuda_device()).permute({1, 2, 0})
                                                                       : stored.to(cuda_device()).permute({2, 1, 0})));
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < got.size(); ++i) expect_close(got[i], want[i], 1e-4, 1e-5);
    }
  }
}

// Dropout between layers in training: one cuDNN op per layer with the dropout ops between; in eval
// mode the whole stack is one op again.
TEST(RnnModules, CudaDropoutRunsOneOpPerLayer) {
  TG_REQUIRE_CUDA();
  auto m = std::make_shared<nn::LSTM>(3, 4, nn::RnnOptions{.num_layers = 3, .dropout = 0.5});
  m->to(cuda_device());
  const Tensor x = random_tensor({6, 2, 3}, kFloat32).to(cuda_device());
  auto count = [&] {
    const graphs::JointGraph joint =
        graphs::trace_joint([m](const TensorList& in) { return TensorList{m->forward(in[0])}; }, {x});
    const auto counts = joint.graph.op_counts();
    return std::pair<int, int>{counts.count("rnn") ? counts.at("rnn") : 0,
                               counts.count("rnn_backward") ? counts.at("rnn_backward") : 0};
  };
  EXPECT_EQ(count(), (std::pair<int, int>{3, 3}));
  m->eval();
  EXPECT_EQ(count().first, 1);
  m->train();
  m->forward(x).sum().backward();
  for (const auto& [name, p] : m->named_parameters()) EXPECT_TRUE(p.grad().defined()) << name;
}

}  // namespace
}  // namespace tg
