// Sequence-model ops beyond the op table (tests/support/op_cases_sequence.h covers gradcheck, meta,
// strided, float32 and CPU-vs-CUDA): exact values, view semantics, padding gradients, recurrent
// cells against hand-computed scalars, and clear errors for bad input.
#include <gtest/gtest.h>

#include <cmath>

#include "graphs/capture/joint.h"
#include "graphs/testing/parity.h"
#include "support/test_support.h"
#include "support/values.h"

namespace tg {
namespace {

using testing::expect_close;
using testing::expect_gradcheck;
using testing::random_tensor;

TEST(Split, PiecesAreViewsWithTheRequestedSizes) {
  Tensor x = arange(0.0, 10.0, 1.0, {.dtype = kFloat64});
  TensorList p = split_with_sizes(x, {3, 0, 7});
  ASSERT_EQ(p.size(), 3u);
  EXPECT_EQ(p[1].numel(), 0);
  EXPECT_EQ(p[2].to_vector<double>().front(), 3.0);
  p[0].fill_(-1.0);  // a view: the write reaches x
  EXPECT_EQ(x.to_vector<double>()[2], -1.0);
  EXPECT_EQ(split(x, 4).size(), 3u);
  EXPECT_EQ(split(x, 4)[2].numel(), 2);
  EXPECT_EQ(chunk(x, 3).size(), 3u);  // ceil(10/3) = 4 -> 4, 4, 2
  EXPECT_EQ(chunk(x, 3)[2].numel(), 2);
  EXPECT_EQ(chunk(arange(0.0, 6.0, 1.0), 4).size(), 3u);  // 2, 2, 2 as torch.chunk
  TensorList rows = unbind(arange(0.0, 6.0, 1.0).reshape({2, 3}), 1);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[2].sizes(), (Shape{2}));
  testing::expect_values(rows[2], {2.0, 5.0});
}

TEST(Split, ErrorsNameTheSizes) {
  Tensor x = zeros({32});
  EXPECT_THROW_MSG(split_with_sizes(x, {7, 16, 8}),
                   "expects split_sizes to sum exactly to 32 (input tensor's size at dimension 0), "
                   "but got split_sizes=[7, 16, 8]");
  EXPECT_THROW_MSG(split_with_sizes(x, {-1, 33}), "non-negative");
  EXPECT_THROW_MSG(split(x, 0), "split_size can only be 0 if dimension size is 0");
  EXPECT_THROW_MSG(chunk(x, 0), "expects `chunks` to be greater than 0, got: 0");
  EXPECT_THROW_MSG(unbind(scalar_tensor(1.0)), "has no dimensions");
  EXPECT_THROW_MSG(split(x, 2, 1), "dim");
}

TEST(Gather, ValuesAndScatterAddAccumulatesDuplicates) {
  Tensor x = arange(0.0, 12.0, 1.0, {.dtype = kFloat64}).reshape({3, 4});
  Tensor idx = from_vector<int64_t>({3, 0, 1, 1, 2, 3}, {3, 2});
  testing::expect_values(gather(x, 1, idx), {3, 0, 5, 5, 10, 11});
  Tensor idx0 = from_vector<int64_t>({2, 0, 1, 0}, {1, 4});
  testing::expect_values(gather(x, 0, idx0), {8, 1, 6, 3});
  Tensor acc = scatter_add(zeros({3, 4}, {.dtype = kFloat64}), 1, idx, ones({3, 2}, {.dtype = kFloat64}));
  testing::expect_values(acc, {1, 0, 0, 1, 0, 2, 0, 0, 0, 0, 1, 1});
}

TEST(Gather, ErrorsForBadIndex) {
  Tensor x = zeros({3, 4});
  EXPECT_THROW_MSG(gather(x, 1, from_vector<int64_t>({4, 0, 0}, {3, 1})), "out of range");
  EXPECT_THROW_MSG(gather(x, 1, from_vector<int64_t>({-1, 0, 0}, {3, 1})), "out of range");
  EXPECT_THROW_MSG(gather(x, 1, from_vector<int32_t>({0, 0, 0}, {3, 1})), "Expected dtype int64 for index, got int32");
  EXPECT_THROW_MSG(gather(x, 1, zeros({3}, {.dtype = kInt64})), "same number of dimensions");
  EXPECT_THROW_MSG(gather(x, 1, zeros({4, 1}, {.dtype = kInt64})), "Size does not match at dimension 0");
  EXPECT_THROW_MSG(scatter_add(x, 1, zeros({3, 1}, {.dtype = kInt64}), zeros({3, 1}, {.dtype = kFloat64})),
                   "Expected self.dtype to be equal to src.dtype");
}

TEST(Masking, TrilTriuMaskedFillValues) {
  Tensor x = ones({3, 3}, {.dtype = kFloat64});
  testing::expect_values(tril(x), {1, 0, 0, 1, 1, 0, 1, 1, 1});
  testing::expect_values(triu(x, 1), {0, 1, 1, 0, 0, 1, 0, 0, 0});
  testing::expect_values(tril(x, -1), {0, 0, 0, 1, 0, 0, 1, 1, 0});
  Tensor m = ne(from_vector<int64_t>({1, 0, 1}, {3}), 0);
  testing::expect_values(masked_fill(x, m, 5.0), {5, 1, 5, 5, 1, 5, 5, 1, 5});
  EXPECT_THROW_MSG(tril(zeros({3})), "at least 2 dimensions, got shape [3]");
  EXPECT_THROW_MSG(masked_fill(x, zeros({3}), 1.0), "expected a bool mask, got float32");
  EXPECT_THROW_MSG(masked_fill(x, ne(zeros({2}), 0), 1.0), "must be broadcastable to the input's shape [3, 3]");
}

TEST(Embedding, PaddingRowGetsNoGradient) {
  Tensor w = random_tensor({5, 3}, kFloat64, true);
  Tensor idx = from_vector<int64_t>({4, 0, 4, 2}, {2, 2});
  Tensor out = embedding(w, idx, 4);
  expect_close(out.select(0, 0).select(0, 0), w.detach().select(0, 4));  // the forward still reads the row
  out.sum().backward();
  testing::expect_values(w.grad().select(0, 4), {0, 0, 0});
  testing::expect_values(w.grad().select(0, 0), {1, 1, 1});
  testing::expect_values(w.grad().select(0, 1), {0, 0, 0});
  Tensor w2 = random_tensor({5, 3}, kFloat64, true);
  embedding(w2, idx, -1).sum().backward();  // -1 wraps to 4
  testing::expect_values(w2.grad().select(0, 4), {0, 0, 0});
  EXPECT_THROW_MSG(embedding(zeros({5}), idx), "'weight' must be 2-D, got shape [5]");
  EXPECT_THROW_MSG(embedding(zeros({5, 3}), zeros({2})), "Long, Int; but got float32");
  EXPECT_THROW_MSG(embedding(zeros({5, 3}), idx, 5), "padding_idx 5 must be within num_embeddings (5)");
  EXPECT_THROW_MSG(embedding(zeros({5, 3}), from_vector<int64_t>({5}, {1})), "out of range");
}

TEST(Attention, CausalMaskEqualsAnExplicitBoolMask) {
  Tensor q = random_tensor({2, 4, 3}), k = random_tensor({2, 4, 3}), v = random_tensor({2, 4, 5});
  Tensor keep = ne(tril(ones({4, 4}, {.dtype = kInt64})), 0);
  expect_close(scaled_dot_product_attention(q, k, v, Tensor(), 0.0, true),
               scaled_dot_product_attention(q, k, v, keep), 1e-12, 1e-12);
  // The first query sees only the first key: its output is v's first row.
  expect_close(scaled_dot_product_attention(q, k, v, Tensor(), 0.0, true).select(1, 0), v.select(1, 0), 1e-12,
               1e-12);
  // One key: softmax weight 1 everywhere.
  expect_close(scaled_dot_product_attention(q, k.narrow(1, 0, 1), v.narrow(1, 0, 1)),
               v.narrow(1, 0, 1).expand({2, 4, 5}), 1e-12, 1e-12);
  // Dropout in training keeps the expectation; with p near 0 it changes nothing measurable in shape.
  EXPECT_EQ(scaled_dot_product_attention(q, k, v, Tensor(), 0.5).sizes(), (Shape{2, 4, 5}));
  EXPECT_THROW_MSG(scaled_dot_product_attention(q, random_tensor({2, 4, 2}), v), "query's last dim 3 must equal key's 2");
  EXPECT_THROW_MSG(scaled_dot_product_attention(q, k, random_tensor({2, 3, 5})), "same sequence length");
  EXPECT_THROW_MSG(scaled_dot_product_attention(q, k, v, keep, 0.0, true), "Explicit attn_mask should not be set");
  EXPECT_THROW_MSG(scaled_dot_product_attention(q, k, v, Tensor(), 1.0), "dropout_p must be in [0, 1), got 1");
}

// A query whose every key is masked attends to nothing: a zero output row and zero gradients
// (PyTorch 2.5+'s math path), where a plain softmax gave NaN that reached every gradient.
TEST(Attention, FullyMaskedRowsGiveZerosAndZeroGradients) {
  for (DType dt : {kFloat64, kFloat32, kFloat16}) {
    SCOPED_TRACE(dtype_name(dt));
    Tensor q = random_tensor({2, 3, 4}, kFloat64).to(dt).requires_grad_(true);
    Tensor k = random_tensor({2, 5, 4}, kFloat64).to(dt).requires_grad_(true);
    Tensor v = random_tensor({2, 5, 6}, kFloat64).to(dt).requires_grad_(true);
    // Query 1 of batch 0 sees no key; the others see some.
    std::vector<int64_t> keep_values(2 * 3 * 5, 1);
    for (int64_t s = 0; s < 5; ++s) keep_values[static_cast<size_t>(1 * 5 + s)] = 0;
    keep_values[static_cast<size_t>(2 * 5 + 4)] = 0;
    const Tensor keep = ne(from_vector(keep_values, {2, 3, 5}), 0);
    const Tensor out = scaled_dot_product_attention(q, k, v, keep);
    EXPECT_TRUE(equal(out.select(0, 0).select(0, 1).to(kFloat64), zeros({6}, {.dtype = kFloat64})));
    out.to(kFloat64).sum().backward();
    for (const Tensor& g : {q.grad(), k.grad(), v.grad()})
      EXPECT_TRUE(std::isfinite(g.to(kFloat64).abs().amax().item<double>()));
    EXPECT_TRUE(equal(q.grad().select(0, 0).select(0, 1).to(kFloat64), zeros({4}, {.dtype = kFloat64})));
    // The other rows are those of attention without the masked query.
    const Tensor rest = scaled_dot_product_attention(q.detach().narrow(1, 2, 1), k.detach(), v.detach(),
                                                     keep.narrow(1, 2, 1));
    expect_close(out.narrow(1, 2, 1).to(kFloat64), rest.to(kFloat64), 1e-3, 1e-3);
  }
  // The same through the gradient checker in float64, with an additive -inf mask making the row.
  const Tensor bias = where(ne(tril(ones({3, 4}, {.dtype = kInt64}), -1), 0), zeros({}, {.dtype = kFloat64}),
                            full({}, -INFINITY, {.dtype = kFloat64}));
  expect_gradcheck([bias](const TensorList& t) { return scaled_dot_product_attention(t[0], t[1], t[2], bias); },
                   {random_tensor({1, 3, 2}, kFloat64, true), random_tensor({1, 4, 2}, kFloat64, true),
                    random_tensor({1, 4, 3}, kFloat64, true)});
}

double sig(double x) { return 1.0 / (1.0 + std::exp(-x)); }

TEST(Rnn, LstmAndGruCellsMatchHandComputedScalars) {
  // T = 2, B = 1, I = 1, H = 1.
  const std::vector<double> wi{0.3, -0.2, 0.5, 0.1}, wh{-0.4, 0.6, 0.2, -0.3}, bi{0.05, -0.1, 0.2, 0.0},
      bh{0.1, 0.0, -0.05, 0.3};
  const std::vector<double> xs{0.7, -1.1};
  auto t = [](const std::vector<double>& v, Shape s) { return from_vector(v, s); };
  RnnLayerResult r = lstm_layer(t(xs, {2, 1, 1}), t({0.2}, {1, 1}), t({-0.5}, {1, 1}), t(wi, {4, 1}), t(wh, {4, 1}),
                                t(bi, {4}), t(bh, {4}));
  double h = 0.2, c = -0.5;
  std::vector<double> hs;
  for (double x : xs) {
    double g[4];
    for (int j = 0; j < 4; ++j) g[j] = wi[j] * x + bi[j] + wh[j] * h + bh[j];
    c = sig(g[1]) * c + sig(g[0]) * std::tanh(g[2]);
    h = sig(g[3]) * std::tanh(c);
    hs.push_back(h);
  }
  testing::expect_values(r.output, hs, 1e-12);
  testing::expect_values(r.c, {c}, 1e-12);
  // Reverse: the second step is processed first, outputs stay in input order.
  RnnLayerResult rr = lstm_layer(t(xs, {2, 1, 1}), t({0.0}, {1, 1}), t({0.0}, {1, 1}), t(wi, {4, 1}), t(wh, {4, 1}),
                                 Tensor(), Tensor(), true);
  h = 0.0, c = 0.0;
  std::vector<double> rev(2);
  for (int s = 1; s >= 0; --s) {
    double g[4];
    for (int j = 0; j < 4; ++j) g[j] = wi[j] * xs[static_cast<size_t>(s)] + wh[j] * h;
    c = sig(g[1]) * c + sig(g[0]) * std::tanh(g[2]);
    h = sig(g[3]) * std::tanh(c);
    rev[static_cast<size_t>(s)] = h;
  }
  testing::expect_values(rr.output, rev, 1e-12);
  testing::expect_values(rr.h, {rev[0]}, 1e-12);

  const std::vector<double> gwi{0.3, -0.2, 0.5}, gwh{-0.4, 0.6, 0.2}, gbi{0.05, -0.1, 0.2}, gbh{0.1, 0.0, -0.05};
  RnnLayerResult g = gru_layer(t(xs, {2, 1, 1}), t({0.2}, {1, 1}), t(gwi, {3, 1}), t(gwh, {3, 1}), t(gbi, {3}),
                               t(gbh, {3}));
  h = 0.2;
  std::vector<double> ghs;
  for (double x : xs) {
    const double rg = sig(gwi[0] * x + gbi[0] + gwh[0] * h + gbh[0]);
    const double z = sig(gwi[1] * x + gbi[1] + gwh[1] * h + gbh[1]);
    const double n = std::tanh(gwi[2] * x + gbi[2] + rg * (gwh[2] * h + gbh[2]));
    h = (1 - z) * n + z * h;
    ghs.push_back(h);
  }
  testing::expect_values(g.output, ghs, 1e-12);
}

TEST(Rnn, ErrorsNameShapes) {
  Tensor x = zeros({3, 2, 4}), h = zeros({2, 5});
  EXPECT_THROW_MSG(lstm_layer(zeros({3, 4}), h, h, zeros({20, 4}), zeros({20, 5}), Tensor(), Tensor()),
                   "expected input of shape [seq_len, batch, input_size], got [3, 4]");
  EXPECT_THROW_MSG(lstm_layer(x, h, h, zeros({20, 3}), zeros({20, 5}), Tensor(), Tensor()),
                   "expected weight_ih of shape [20, 4] (input_size 4), got [20, 3]");
  EXPECT_THROW_MSG(lstm_layer(x, zeros({3, 5}), h, zeros({20, 4}), zeros({20, 5}), Tensor(), Tensor()),
                   "Expected hidden size [2, 5], got [3, 5]");
  EXPECT_THROW_MSG(gru_layer(x, h, zeros({15, 4}), zeros({15, 5}), zeros({14}), Tensor()), "expected biases of shape [15]");
}

// One stacked recurrent call under test.
struct RnnCase {
  RnnMode mode;
  int64_t layers;
  bool bidirectional;
  bool bias;
  int64_t T = 5, B = 3, I = 4, H = 6;
  std::string str() const {
    return std::string(mode == RnnMode::LSTM ? "lstm" : "gru") + " layers=" + std::to_string(layers) +
           (bidirectional ? " bidirectional" : "") + (bias ? "" : " no-bias");
  }
};

// Leaves of rnn(): x stored as [I, B, T] (read through a permutation: not contiguous), h0, c0, then
// the weights in torch.nn.LSTM's order; values in [-0.5, 0.5).
TensorList rnn_leaves(const RnnCase& c, DType dtype) {
  const int64_t G = c.mode == RnnMode::LSTM ? 4 : 3, D = c.bidirectional ? 2 : 1;
  auto u = [&](const Shape& s) { return random_tensor(s, dtype, true, -0.5, 0.5); };
  TensorList in{u({c.I, c.B, c.T}), u({c.layers * D, c.B, c.H}), u({c.layers * D, c.B, c.H})};
  for (int64_t l = 0; l < c.layers; ++l)
    for (int64_t d = 0; d < D; ++d) {
      in.push_back(u({G * c.H, l == 0 ? c.I : D * c.H}));
      in.push_back(u({G * c.H, c.H}));
      if (c.bias) {
        in.push_back(u({G * c.H}));
        in.push_back(u({G * c.H}));
      }
    }
  return in;
}

// rnn() on the leaves: output, h (and c for LSTM).
RnnResult run_rnn(const RnnCase& c, const TensorList& leaves) {
  const TensorList w(leaves.begin() + 3, leaves.end());
  return rnn(c.mode, leaves[0].permute({2, 1, 0}), leaves[1], c.mode == RnnMode::LSTM ? leaves[2] : Tensor(), w,
             c.layers, c.bidirectional);
}

// Outputs of rnn() on `device` copies of the CPU leaves, then the gradient of every used leaf under a
// weighted loss (weights drawn from `loss_seed`).
TensorList rnn_values_and_grads(const RnnCase& c, const TensorList& cpu_leaves, Device device) {
  TensorList leaves;
  for (const Tensor& t : cpu_leaves) leaves.push_back(t.detach().to(device).requires_grad_(true));
  const RnnResult r = run_rnn(c, leaves);
  manual_seed(99);
  const bool lstm = c.mode == RnnMode::LSTM;
  Tensor loss = (r.output * random_tensor(r.output.sizes(), r.output.dtype()).to(device)).sum() +
                (r.h * random_tensor(r.h.sizes(), r.h.dtype()).to(device)).sum();
  if (lstm) loss = loss + (r.c * random_tensor(r.c.sizes(), r.c.dtype()).to(device)).sum();
  loss.backward();
  TensorList out{r.output.detach(), r.h.detach()};
  if (lstm) out.push_back(r.c.detach());
  for (size_t i = 0; i < leaves.size(); ++i)
    if (lstm || i != 2) out.push_back(leaves[i].grad());
  return out;
}

std::vector<RnnCase> rnn_cases() {
  return {{RnnMode::LSTM, 1, false, true}, {RnnMode::LSTM, 2, true, true}, {RnnMode::LSTM, 2, true, false},
          {RnnMode::GRU, 1, true, true},   {RnnMode::GRU, 2, false, true}, {RnnMode::GRU, 2, true, false}};
}

// Float64 gradients of the fused CPU kernel against finite differences.
TEST(RnnStack, GradcheckOnTheCpu) {
  for (const RnnCase& c : {RnnCase{RnnMode::LSTM, 2, true, true, 3, 2, 2, 2}, RnnCase{RnnMode::GRU, 2, true, true, 3, 2, 2, 2},
                           RnnCase{RnnMode::LSTM, 1, false, false, 4, 2, 3, 2}, RnnCase{RnnMode::GRU, 1, false, false, 4, 2, 3, 2}}) {
    SCOPED_TRACE(c.str());
    manual_seed(5);
    testing::expect_gradcheck(
        [c](const TensorList& in) {
          const RnnResult r = run_rnn(c, in);
          Tensor s = r.output.sum() + (r.h * r.h).sum();
          return c.mode == RnnMode::LSTM ? s + r.c.sum() * 0.5 : s;
        },
        rnn_leaves(c, kFloat64));
  }
}

// The fused CPU kernel against the composed layers (one op per step).
TEST(RnnStack, FusedOnTheCpuMatchesLayerByLayer) {
  const RnnCase c{RnnMode::LSTM, 2, true, true};
  manual_seed(6);
  const TensorList in = rnn_leaves(c, kFloat64);
  const RnnResult r = run_rnn(c, in);
  const Tensor x = in[0].permute({2, 1, 0});
  RnnLayerResult f0 = lstm_layer(x, in[1].select(0, 0), in[2].select(0, 0), in[3], in[4], in[5], in[6]);
  RnnLayerResult b0 = lstm_layer(x, in[1].select(0, 1), in[2].select(0, 1), in[7], in[8], in[9], in[10], true);
  RnnLayerResult f1 = lstm_layer(cat({f0.output, b0.output}, 2), in[1].select(0, 2), in[2].select(0, 2), in[11],
                                 in[12], in[13], in[14]);
  expect_close(r.output.narrow(2, 0, c.H), f1.output, 1e-12, 1e-12);
  expect_close(r.h.select(0, 1), b0.h, 1e-12, 1e-12);
  expect_close(r.c.select(0, 2), f1.c, 1e-12, 1e-12);
}

TEST(RnnStack, ErrorsNameTheOperand) {
  const RnnCase c{RnnMode::LSTM, 2, true, true};
  const TensorList in = rnn_leaves(c, kFloat64);
  const Tensor x = in[0].permute({2, 1, 0}), h0 = in[1], c0 = in[2];
  const TensorList w(in.begin() + 3, in.end());
  EXPECT_THROW_MSG(rnn(RnnMode::LSTM, x, h0, c0, TensorList(w.begin(), w.end() - 1), 2, true),
                   "expected 16 weights (w_ih, w_hh, b_ih, b_hh per layer and direction) or 8 without biases, got 15");
  TensorList bad = w;
  bad[8] = zeros({24, 4}, {.dtype = kFloat64});
  EXPECT_THROW_MSG(rnn(RnnMode::LSTM, x, h0, c0, bad, 2, true),
                   "expected weight_ih_l1 of shape [24, 12] (input_size 4, hidden_size 6), got [24, 4]");
  bad = w;
  bad[15] = zeros({24}, {.dtype = kFloat32});
  EXPECT_THROW_MSG(rnn(RnnMode::LSTM, x, h0, c0, bad, 2, true), "bias_hh_l1_reverse has dtype float32 but input has float64");
  EXPECT_THROW_MSG(rnn(RnnMode::LSTM, x, h0.narrow(0, 0, 2), c0, w, 2, true),
                   "expected h0 of shape [num_layers*num_directions, batch, hidden_size] = [4, 3, hidden_size], got [2, 3, 6]");
  EXPECT_THROW_MSG(rnn(RnnMode::LSTM, x, h0, Tensor(), w, 2, true), "expected c0 of shape [4, 3, 6] (as h0), got an undefined tensor");
  EXPECT_THROW_MSG(rnn(RnnMode::GRU, x, h0, Tensor(), w, 2, true), "expected weight_ih_l0 of shape [18, 4]");
  EXPECT_THROW_MSG(rnn(RnnMode::LSTM, x.select(0, 0), h0, c0, w, 2, true),
                   "expected input of shape [seq_len, batch, input_size], got [3, 4]");
  EXPECT_THROW_MSG(rnn(RnnMode::LSTM, x, h0, c0, w, 0, true), "num_layers must be positive, got 0");
}

// CUDA (cuDNN) against the CPU kernel: outputs and every gradient.
TEST(RnnStack, CudaMatchesCpu) {
  TG_REQUIRE_CUDA();
  for (const DType dtype : {kFloat64, kFloat32}) {
    for (const RnnCase& c : rnn_cases()) {
      SCOPED_TRACE(c.str() + " " + std::string(dtype_name(dtype)));
      manual_seed(7);
      const TensorList leaves = rnn_leaves(c, dtype);
      const TensorList cpu = rnn_values_and_grads(c, leaves, kCPU);
      const TensorList gpu = rnn_values_and_grads(c, leaves, cuda_device());
      ASSERT_EQ(cpu.size(), gpu.size());
      for (size_t i = 0; i < cpu.size(); ++i) {
        SCOPED_TRACE("result " + std::to_string(i));
        ASSERT_TRUE(gpu[i].defined());
        if (dtype == kFloat64) {
          expect_close(gpu[i], cpu[i], 1e-9, 1e-11);
        } else {
          expect_close(gpu[i], cpu[i], 1e-4, 1e-5);
        }
      }
    }
  }
}

std::vector<Device> test_devices() {
  std::vector<Device> d{kCPU};
  if (cuda_is_available()) d.push_back(cuda_device());
  return d;
}

// A traced stack is one forward node and one backward node, on every device.
TEST(RnnStack, IsOneNodeForwardAndOneBackward) {
  for (const Device device : test_devices()) {
    SCOPED_TRACE(device.str());
    const RnnCase c{RnnMode::LSTM, 2, true, true};
    TensorList leaves;
    for (const Tensor& t : rnn_leaves(c, kFloat32)) leaves.push_back(t.detach().to(device).requires_grad_(true));
    const graphs::JointGraph joint = graphs::trace_joint(
        [c](const TensorList& in) {
          const RnnResult r = run_rnn(c, in);
          return TensorList{r.output, r.h, r.c};
        },
        leaves);
    const auto counts = joint.graph.op_counts();
    EXPECT_EQ(counts.at("rnn"), 1) << joint.graph.to_text();
    EXPECT_EQ(counts.at("rnn_backward"), 1) << joint.graph.to_text();
    EXPECT_EQ(counts.count("addmm"), 0u);
    EXPECT_EQ(counts.count("sigmoid"), 0u);
  }
}

// Without grad the forward keeps no reserve (cuDNN's inference mode, CPU scratch memory).
TEST(RnnStack, InferenceMatchesTraining) {
  for (const Device device : test_devices()) {
    for (const RnnCase& c : {RnnCase{RnnMode::GRU, 2, true, true}, RnnCase{RnnMode::LSTM, 2, false, false}}) {
      SCOPED_TRACE(device.str() + " " + c.str());
      TensorList leaves;
      for (const Tensor& t : rnn_leaves(c, kFloat32)) leaves.push_back(t.detach().to(device).requires_grad_(true));
      const RnnResult train = run_rnn(c, leaves);
      NoGradGuard no_grad;
      const RnnResult infer = run_rnn(c, leaves);
      expect_close(infer.output, train.output, 1e-6, 1e-7);
      expect_close(infer.h, train.h, 1e-6, 1e-7);
    }
  }
}

// Empty sequences and batches take the composed path on every device.
TEST(RnnStack, EmptySequenceOrBatch) {
  std::vector<Device> devices{kCPU};
  if (cuda_is_available()) devices.push_back(cuda_device());
  for (const auto& [T, B, device] : {std::tuple<int64_t, int64_t, size_t>{0, 3, 0}, {4, 0, 0}, {0, 3, 1}, {4, 0, 1}}) {
    if (device >= devices.size()) continue;
    RnnCase c{RnnMode::LSTM, 2, true, true, T, B};
    TensorList leaves;
    for (const Tensor& t : rnn_leaves(c, kFloat32)) leaves.push_back(t.detach().to(devices[device]));
    const RnnResult r = run_rnn(c, leaves);
    EXPECT_EQ(r.output.sizes(), (Shape{T, B, 12}));
    EXPECT_EQ(r.h.sizes(), (Shape{4, B, 6}));
    if (T == 0) expect_close(r.c, leaves[2]);
  }
}

TEST(RnnStack, CompiledUnderCudagraphsMatchesEager) {
  TG_REQUIRE_CUDA();
  for (const RnnCase& c : {RnnCase{RnnMode::LSTM, 2, true, true}, RnnCase{RnnMode::GRU, 1, false, true}}) {
    SCOPED_TRACE(c.str());
    TensorList leaves;
    for (const Tensor& t : rnn_leaves(c, kFloat32)) leaves.push_back(t.detach().to(cuda_device()).requires_grad_(true));
    testing::expect_compiled_matches_eager(
        [c](const TensorList& in) {
          const RnnResult r = run_rnn(c, in);
          return c.mode == RnnMode::LSTM ? TensorList{r.output, r.h, r.c} : TensorList{r.output, r.h};
        },
        leaves, {.compile = {.backend = "cudagraphs"}, .rtol = 1e-5, .atol = 1e-6, .calls = 3});
  }
}

}  // namespace
}  // namespace tg
