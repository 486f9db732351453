// The fused linear epilogues: the ops (against their unfused compositions, gradchecked in float64,
// CUDA against CPU, the ReLU mask against the one cuBLASLt writes), the graph rewrites that
// substitute them (on data-less CUDA traces, so these run anywhere), and on a GPU compiled MLPs with
// every fusion on against the same graphs unfused and against eager mode.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <sstream>

#include "graphs/capture/fake.h"
#include "graphs/capture/joint.h"
#include "graphs/partition/partition.h"
#include "graphs/passes/epilogue_fusion.h"
#include "graphs/testing/parity.h"
#include "ops/elementwise/elementwise.h"
#include "ops/linalg/bias_grad.h"
#include "ops/linalg/linear_grad.h"
#include "ops/linalg/matmul_kernels.h"
#include "support/test_support.h"

#ifdef TG_WITH_CUDA
#include "ops/linalg/cuda/blas.h"
#include "ops/linalg/gemm.h"
#endif

namespace tg {
namespace {

using testing::expect_close;
using testing::random_tensor;

// The bits of a ReLU mask as booleans over [rows, cols].
std::vector<bool> mask_bits(const Tensor& mask, int64_t rows, int64_t cols) {
  const Tensor m = mask.cpu().contiguous();
  const auto* words = m.data_ptr<int32_t>();
  const int64_t per_row = m.size(1);
  std::vector<bool> bits;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      bits.push_back(((static_cast<uint32_t>(words[r * per_row + c / 32]) >> (c % 32)) & 1u) != 0);
  return bits;
}

std::vector<bool> positive(const Tensor& y) {
  std::vector<bool> out;
  for (double v : y.cpu().to(kFloat64).contiguous().to_vector<double>()) out.push_back(v > 0);
  return out;
}

TEST(LinearReluMask, OutputAndMaskMatchTheUnfusedOps) {
  for (const auto& [rows, in, out] : std::vector<std::array<int64_t, 3>>{{7, 5, 70}, {3, 4, 128}, {1, 3, 300}}) {
    const Tensor x = randn({rows, in}), w = randn({out, in}), b = randn({out});
    auto [y, mask] = linear_relu_mask(x, w, b);
    expect_close(y, relu(linear(x, w, b)));
    EXPECT_EQ(mask.sizes(), (Shape{rows, relu_mask_row_bits(out) / 32}));
    EXPECT_EQ(mask.dtype(), kInt32);
    EXPECT_EQ(mask_bits(mask, rows, out), positive(y));
    // Bits past the last column stay clear.
    const std::vector<bool> padded = mask_bits(mask, rows, relu_mask_row_bits(out));
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = out; c < relu_mask_row_bits(out); ++c) EXPECT_FALSE(padded[r * relu_mask_row_bits(out) + c]);
  }
  EXPECT_EQ(relu_mask_row_bits(1), 128);
  EXPECT_EQ(relu_mask_row_bits(256), 256);
  EXPECT_EQ(relu_mask_row_bits(257), 384);
}

TEST(LinearReluMask, GradcheckThroughTheOutputAndLeadingDims) {
  testing::expect_gradcheck([](const TensorList& in) { return linear_relu_mask(in[0], in[1], in[2]).first; },
                            {random_tensor({2, 3, 4}, kFloat64, true), random_tensor({5, 4}, kFloat64, true),
                             random_tensor({5}, kFloat64, true)});
  auto [y, mask] = linear_relu_mask(randn({2, 3, 4}), randn({6, 4}));
  EXPECT_EQ(y.sizes(), (Shape{2, 3, 6}));
  EXPECT_EQ(mask.sizes(), (Shape{6, 4}));
  EXPECT_FALSE(mask.requires_grad());
}

TEST(LinearGeluTanh, OutputsAndGradcheck) {
  const Tensor x = randn({6, 5}), w = randn({7, 5}), b = randn({7});
  auto [y, pre] = linear_gelu_tanh(x, w, b);
  expect_close(pre, linear(x, w, b), 1e-5, 1e-6);
  expect_close(y, gelu(linear(x, w, b), "tanh"), 1e-5, 1e-6);
  // Both outputs carry gradients: the GELU's and the pre-activation's own.
  testing::expect_gradcheck([](const TensorList& in) {
    auto [a, p] = linear_gelu_tanh(in[0], in[1], in[2]);
    return a.sum() + (p * p).sum() * 0.25;
  }, {random_tensor({4, 3}, kFloat64, true), random_tensor({5, 3}, kFloat64, true), random_tensor({5}, kFloat64, true)});
}

TEST(MmReluBackwardBiasGrad, MatchesTheUnfusedOpsAndGradchecks) {
  const Tensor g = randn({6, 4}), w = randn({4, 5}), y = relu(randn({6, 5}));
  auto [h, db] = mm_relu_backward_bias_grad(g, w, y, relu_mask_of(y));
  expect_close(h, threshold_backward(mm(g, w), y), 1e-5, 1e-6);
  expect_close(db, sum_to(threshold_backward(mm(g, w), y), {5}), 1e-5, 1e-5);
  const Tensor yd = relu(random_tensor({6, 5}));
  testing::expect_gradcheck([yd](const TensorList& in) {
    auto [a, b] = mm_relu_backward_bias_grad(in[0], in[1], yd, relu_mask_of(yd));
    return a.sum() * 0.5 + (b * b).sum();
  }, {random_tensor({6, 4}, kFloat64, true), random_tensor({4, 5}, kFloat64, true)});
  EXPECT_THROW_MSG(mm_relu_backward_bias_grad(g, w, randn({6, 4}), relu_mask_of(y)),
                   "expected ReLU output of shape [6, 5], got [6, 4]");
  EXPECT_THROW_MSG(mm_relu_backward_bias_grad(g, w, y, relu_mask_of(randn({6, 300}))),
                   "expected ReLU mask of shape [6, 4], got [6, 12]");
}

TEST(MmGeluTanhBackwardBiasGrad, MatchesTheUnfusedOpsAndGradchecks) {
  const Tensor g = randn({6, 4}), w = randn({4, 5}), pre = randn({6, 5});
  auto [h, db] = mm_gelu_tanh_backward_bias_grad(g, w, pre);
  expect_close(h, gelu_backward(mm(g, w), pre, true), 1e-5, 1e-6);
  expect_close(db, sum_to(gelu_backward(mm(g, w), pre, true), {5}), 1e-5, 1e-5);
  testing::expect_gradcheck([](const TensorList& in) {
    auto [a, b] = mm_gelu_tanh_backward_bias_grad(in[0], in[1], in[2]);
    return a.sum() * 0.5 + (b * b).sum();
  }, {random_tensor({3, 4}, kFloat64, true), random_tensor({4, 5}, kFloat64, true), random_tensor({3, 5}, kFloat64, true)});
}

TEST(LinearWeightBiasGrad, MatchesTheUnfusedOpsAndGradchecks) {
  const Tensor g = randn({8, 3}), x = randn({8, 5});
  auto [dw, db] = linear_weight_bias_grad(g, x);
  expect_close(dw, mm(g.t(), x), 1e-5, 1e-6);
  expect_close(db, sum_to(g, {3}), 1e-5, 1e-6);
  testing::expect_gradcheck([](const TensorList& in) {
    auto [a, b] = linear_weight_bias_grad(in[0], in[1]);
    return (a * a).sum() + b.sum();
  }, {random_tensor({4, 3}, kFloat64, true), random_tensor({4, 2}, kFloat64, true)});
  EXPECT_THROW_MSG(linear_weight_bias_grad(randn({8, 3}), randn({7, 5})),
                   "output gradient of shape [8, 3] and input of shape [7, 5]: expected the same number of rows");
}

// ---- the rewrites, on graphs traced from data-less CUDA tensors -----------------------------------

int count_ops(const graphs::Graph& g, std::string_view name) {
  return static_cast<int>(std::count_if(g.nodes.begin(), g.nodes.end(),
                                        [&](const graphs::GraphNode& n) { return n.op->name() == name; }));
}

// An MLP loss x -> act(linear) -> act(linear) -> linear -> cross_entropy, traced and partitioned, with
// the epilogue passes applied in compile()'s order.
struct TracedMlp {
  graphs::Partition partition;
  size_t forward_outputs_before = 0, saved_inputs_before = 0;
};

TracedMlp traced_mlp(bool gelu, Device device) {
  auto f = [device](const Shape& s) { return graphs::fake_tensor(s, kFloat32, device, true); };
  const TensorList args = {graphs::fake_tensor({64, 128}, kFloat32, device, false),
                           graphs::fake_tensor({64}, kInt64, device, false), f({256, 128}), f({256}), f({256, 256}),
                           f({256}), f({10, 256}), f({10})};
  auto act = [gelu](const Tensor& t) { return gelu ? tg::gelu(t, "tanh") : relu(t); };
  auto fn = [act](const TensorList& a) -> TensorList {
    const Tensor h = act(linear(act(linear(a[0], a[2], a[3])), a[4], a[5]));
    return {cross_entropy(linear(h, a[6], a[7]), a[1])};
  };
  TracedMlp t;
  t.partition = graphs::partition(graphs::trace_joint(fn, args), graphs::PartitionerKind::Default);
  graphs::Partition& p = t.partition;
  t.forward_outputs_before = p.forward.outputs.size();
  for (const graphs::GraphInput& in : p.backward.inputs) t.saved_inputs_before += in.kind == graphs::InputKind::Saved;
  graphs::fuse_linear_relu(p.forward);
  graphs::fuse_linear_gelu_tanh(p.forward);
  graphs::fuse_relu_backward_bias_grad(p.backward);
  graphs::fuse_relu_mask_gradients(p, 1);  // one user output, no mutations
  graphs::fuse_gelu_tanh_gradients(p.backward);
  graphs::fuse_weight_bias_grads(p.backward);
  return t;
}

TEST(EpilogueFusionPass, ReluMlpSavesMasksAndFusesEveryGradientProduct) {
  const TracedMlp t = traced_mlp(false, cuda_device(0));
  const graphs::Graph& fw = t.partition.forward;
  const graphs::Graph& bw = t.partition.backward;
  EXPECT_EQ(count_ops(fw, "linear_relu_mask"), 2);
  EXPECT_EQ(count_ops(fw, "relu"), 0);
  EXPECT_EQ(count_ops(bw, "mm_relu_backward_bias_grad"), 2);
  EXPECT_EQ(count_ops(bw, "relu_backward_bias_grad"), 0);
  EXPECT_EQ(count_ops(bw, "linear_weight_bias_grad"), 1);  // the last layer's, which no ReLU follows
  EXPECT_EQ(count_ops(bw, "sum_to_size"), 0);
  EXPECT_EQ(count_ops(bw, "mm"), 2);  // the two hidden layers' weight gradients
  // Each mask is a new last forward output and a saved backward input, all saved inputs first.
  ASSERT_EQ(fw.outputs.size(), t.forward_outputs_before + 2);
  size_t saved = 0;
  bool tangent_seen = false;
  for (const graphs::GraphInput& in : bw.inputs) {
    if (in.kind == graphs::InputKind::Saved) {
      EXPECT_FALSE(tangent_seen) << "a saved input after a tangent";
      EXPECT_EQ(in.index, static_cast<int32_t>(saved)) << "saved inputs in order";
      const graphs::Value& fv = fw.values[static_cast<size_t>(fw.outputs[1 + saved])];
      const graphs::Value& bv = bw.values[static_cast<size_t>(in.value)];
      EXPECT_EQ(fv.meta.sizes, bv.meta.sizes);
      EXPECT_EQ(fv.meta.dtype, bv.meta.dtype);
      ++saved;
    } else {
      tangent_seen = true;
    }
  }
  EXPECT_EQ(saved, t.saved_inputs_before + 2);
  for (size_t k = fw.outputs.size() - 2; k < fw.outputs.size(); ++k) {
    const graphs::Value& mask = fw.values[static_cast<size_t>(fw.outputs[k])];
    EXPECT_EQ(mask.meta.sizes, (Shape{64, 8}));
    EXPECT_EQ(mask.meta.dtype, kInt32);
    EXPECT_EQ(fw.nodes[static_cast<size_t>(mask.producer)].op->name(), "linear_relu_mask");
    EXPECT_EQ(mask.output_index, 1);
  }
  // Every value a node reads is computed before it (or is an input).
  for (const graphs::Graph* g : {&fw, &bw}) {
    std::vector<bool> ready(g->values.size(), false);
    for (const graphs::GraphInput& in : g->inputs) ready[static_cast<size_t>(in.value)] = true;
    for (const auto& [v, c] : g->constants) ready[static_cast<size_t>(v)] = true;
    for (const graphs::GraphNode& n : g->nodes) {
      for (graphs::ValueId v : n.inputs)
        if (v >= 0) {
          EXPECT_TRUE(ready[static_cast<size_t>(v)]) << n.op->name() << " reads a value not yet computed";
        }
      for (graphs::ValueId v : n.outputs) ready[static_cast<size_t>(v)] = true;
    }
  }
}

TEST(EpilogueFusionPass, GeluMlpFusesTheGeluIntoItsProductAndItsGradientIntoTheOneBefore) {
  const TracedMlp t = traced_mlp(true, cuda_device(0));
  const graphs::Graph& fw = t.partition.forward;
  const graphs::Graph& bw = t.partition.backward;
  EXPECT_EQ(count_ops(fw, "linear_gelu_tanh"), 2);
  EXPECT_EQ(count_ops(fw, "gelu"), 0);
  EXPECT_EQ(count_ops(bw, "mm_gelu_tanh_backward_bias_grad"), 2);
  EXPECT_EQ(count_ops(bw, "gelu_backward"), 0);
  EXPECT_EQ(count_ops(bw, "linear_weight_bias_grad"), 1);
  EXPECT_EQ(fw.outputs.size(), t.forward_outputs_before);  // the pre-activations were saved already
}

TEST(EpilogueFusionPass, CpuGraphsKeepTheirProducts) {
  const TracedMlp t = traced_mlp(false, kCPU);
  EXPECT_EQ(count_ops(t.partition.forward, "linear_relu"), 2);
  EXPECT_EQ(count_ops(t.partition.backward, "relu_backward_bias_grad"), 2);
  EXPECT_EQ(count_ops(t.partition.backward, "mm_relu_backward_bias_grad"), 0);
  EXPECT_EQ(count_ops(t.partition.backward, "linear_weight_bias_grad"), 0);
  EXPECT_EQ(t.partition.forward.outputs.size(), t.forward_outputs_before);
  const TracedMlp g = traced_mlp(true, kCPU);
  EXPECT_EQ(count_ops(g.partition.forward, "linear_gelu_tanh"), 0);
}

// ---- on a GPU ------------------------------------------------------------------------------------

TEST(LinearEpilogues, CudaMatchesCpu) {
  TG_REQUIRE_CUDA();
  // Shapes where cuBLASLt's epilogues apply (aligned, GELU rows a multiple of 8) and where they do not.
  for (const auto& [n, k, m] : std::vector<std::array<int64_t, 3>>{{64, 128, 256}, {33, 20, 70}, {256, 64, 10}}) {
    // Operands scaled so products and sums stay near 1: the two devices' float32 rounding then
    // differs by far less than the tolerance (unit-variance operands give products near sqrt(k)).
    auto randn_scaled = [](const Shape& s, int64_t fan_in) { return randn(s) * (1.0 / std::sqrt(double(fan_in))); };
    testing::expect_cuda_matches_cpu([](const TensorList& in) { return linear_relu_mask(in[0], in[1], in[2]).first; },
                                     {randn({n, k}), randn_scaled({m, k}, k), randn({m})}, 1e-4, 1e-4);
    // The mask marks exactly the positive outputs of its own device's product.
    const Device dev = cuda_device(0);
    auto [y, mask] = linear_relu_mask(randn({n, k}, {.device = dev}), randn({m, k}, {.device = dev}),
                                      randn({m}, {.device = dev}));
    EXPECT_EQ(mask_bits(mask, n, m), positive(y)) << n << "x" << k << " @ " << k << "x" << m;
    testing::expect_cuda_matches_cpu([](const TensorList& in) {
      auto [y, pre] = linear_gelu_tanh(in[0], in[1], in[2]);
      return cat({y.reshape({-1}), pre.reshape({-1})});
    }, {randn({n, k}), randn_scaled({m, k}, k), randn({m})}, 1e-4, 1e-4);
    testing::expect_cuda_matches_cpu([](const TensorList& in) {
      const Tensor y = relu(in[2]);
      auto [h, db] = mm_relu_backward_bias_grad(in[0], in[1], y, relu_mask_of(y));
      return cat({h.reshape({-1}), db});
    }, {randn_scaled({n, k}, n), randn_scaled({k, m}, k), randn({n, m})}, 1e-4, 1e-4);
    testing::expect_cuda_matches_cpu([](const TensorList& in) {
      auto [h, db] = mm_gelu_tanh_backward_bias_grad(in[0], in[1], in[2]);
      return cat({h.reshape({-1}), db});
    }, {randn_scaled({n, k}, n), randn_scaled({k, m}, k), randn({n, m})}, 1e-4, 1e-4);
    testing::expect_cuda_matches_cpu([](const TensorList& in) {
      auto [dw, db] = linear_weight_bias_grad(in[0], in[1]);
      return cat({dw.reshape({-1}), db});
    }, {randn_scaled({n, m}, n), randn({n, k})}, 1e-4, 1e-4);
  }
}

// The fused GELU keeps its far negative tail: gelu_tanh(x) for x down to -12 is tiny but not 0
// (an epilogue that flushed it to 0 turned a later x / x into NaN, PyTorch-oracle seed 662).
TEST(LinearEpilogues, CudaGeluTailMatchesTheUnfusedOps) {
  TG_REQUIRE_CUDA();
  const Device dev = cuda_device(0);
  const int64_t n = 64, k = 8, m = 64;
  // x @ w.T + b runs the pre-activations from -12 to 4 along each row: w = 0, b = the ramp.
  const Tensor x = randn({n, k}, {.device = dev});
  const Tensor w = zeros({m, k}, {.device = dev});
  const Tensor b = add(mul(arange(m, {.device = dev}), 16.0 / double(m - 1)), -12.0);
  for (DType dt : {kFloat32, kBFloat16}) {
    auto [fused, pre] = linear_gelu_tanh(x.to(dt), w.to(dt), b.to(dt));
    const Tensor plain = gelu(linear(x.to(dt), w.to(dt), b.to(dt)), "tanh");
    const std::vector<double> f = fused.to(kFloat64).to(kCPU).reshape({-1}).to_vector<double>();
    const std::vector<double> u = plain.to(kFloat64).to(kCPU).reshape({-1}).to_vector<double>();
    for (size_t i = 0; i < u.size(); ++i)
      ASSERT_NEAR(f[i], u[i], 1e-2 * std::abs(u[i]))
          << dtype_name(dt) << " pre-activation " << -12.0 + 16.0 * double(i % m) / double(m - 1);
  }
}

// The fused GELU gradient keeps the far negative tail too: gelu_tanh'(x) down to x = -12.
TEST(LinearEpilogues, CudaGeluGradientTailMatchesTheUnfusedOps) {
  TG_REQUIRE_CUDA();
  const Device dev = cuda_device(0);
  const int64_t n = 64, k = 8, m = 64;
  // g @ w is 1 everywhere (g = 1/k, w = 1); the pre-activations ramp from -12 to 4 along each row.
  const Tensor g = full({n, k}, 1.0 / double(k), {.device = dev});
  const Tensor w = ones({k, m}, {.device = dev});
  const Tensor pre = add(mul(arange(m, {.device = dev}), 16.0 / double(m - 1)), -12.0).expand({n, m}).contiguous();
  auto [fused, db] = mm_gelu_tanh_backward_bias_grad(g, w, pre);
  const Tensor plain = gelu_backward(mm(g, w), pre, true);
  const std::vector<double> f = fused.to(kFloat64).to(kCPU).reshape({-1}).to_vector<double>();
  const std::vector<double> u = plain.to(kFloat64).to(kCPU).reshape({-1}).to_vector<double>();
  for (size_t i = 0; i < u.size(); ++i)
    ASSERT_NEAR(f[i], u[i], 1e-2 * std::abs(u[i])) << "pre-activation " << -12.0 + 16.0 * double(i % m) / double(m - 1);
}

#ifdef TG_WITH_CUDA
// y [n, m] = relu(x [n, k] @ w [m, k]^T + b) and its mask through cuBLASLt's ReLU-mask epilogue
// alone (no fallback); false when cuBLASLt has no algorithm for it.
bool relu_mask_epilogue(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& y, const Tensor& mask) {
  const int64_t n = x.size(0), k = x.size(1), m = w.size(0);
  Tensor keep_x, keep_w;
  const Gemm g = gemm_2d_plan(y, n, m, k, x, false, w, true, 1.0, keep_x, keep_w);
  return cuda::gemm_lt(g, cuda::LtArgs{.epilogue = cuda::LtEpilogue::ReluMask, .bias = b.raw_data(),
                                       .aux = mask.raw_data(), .aux_ld = relu_mask_row_bits(m)});
}

// The mask the fallback kernel writes is bit for bit the one cuBLASLt's ReLU epilogue writes (the
// backward's DRELU_BGRAD reads either).
TEST(LinearEpilogues, FallbackMaskIsCublasLtsMask) {
  TG_REQUIRE_CUDA();
  const Device dev = cuda_device(0);
  for (const auto& [n, k, m] : std::vector<std::array<int64_t, 3>>{{64, 128, 256}, {40, 64, 200}}) {
    const Tensor x = randn({n, k}, {.device = dev}), w = randn({m, k}, {.device = dev}), b = randn({m}, {.device = dev});
    Tensor y = empty({n, m}, {.device = dev});
    Tensor mask = zeros({n, relu_mask_row_bits(m) / 32}, {.dtype = kInt32, .device = dev});
    if (!relu_mask_epilogue(x, w, b, y, mask))
      GTEST_SKIP() << "cuBLASLt has no ReLU-mask epilogue for " << n << "x" << k << " @ " << k << "x" << m;
    expect_close(y, relu(linear(x, w, b)), 1e-4, 1e-4);
    EXPECT_TRUE(equal(relu_mask_of(y).cpu(), mask.cpu())) << n << "x" << m;
  }
}

// Whether `mask` holds bit (r, c) set exactly where y[r, c] > 0, over y's columns (the padding bits
// of a row past them are nobody's: cuBLASLt leaves them as they were); names the first difference.
// Where y is 0, cuBLASLt may set the bit: it marks a pre-activation of exactly 0 too (seen in
// bfloat16, where a product plus its bias cancels exactly about once in 2,000 elements), so a
// DRELU_BGRAD backward passes the gradient there, a subgradient eager mode's threshold does not
// take; only the bits of nonzero outputs are compared.
::testing::AssertionResult mask_matches_output(const Tensor& y, const Tensor& mask) {
  const int64_t rows = y.size(0), cols = y.size(1), words = mask.size(1);
  const std::vector<float> v = y.to(kFloat32).cpu().contiguous().reshape({-1}).to_vector<float>();
  const std::vector<int32_t> bits = mask.cpu().contiguous().reshape({-1}).to_vector<int32_t>();
  int64_t wrong = 0;
  std::ostringstream first;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const bool set = (uint32_t(bits[size_t(r * words + c / 32)]) >> (c % 32)) & 1u;
      const float out = v[size_t(r * cols + c)];
      if (out == 0 || set == (out > 0)) continue;
      if (wrong++ == 0) first << "bit (" << r << ", " << c << ") is " << set << " for y = " << v[size_t(r * cols + c)];
    }
  if (wrong == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << wrong << " of " << rows * cols
                                       << " mask bits of nonzero outputs differ from y > 0; first: "
                                       << first.str();
}

// cuBLASLt's ReLU-mask epilogue writes the product's rows and their mask rows and nothing past them,
// whatever the row count (tiles of the product overhang ragged ones): memory after the output and
// after the mask keeps its sentinel.
TEST(LinearEpilogues, ReluMaskEpilogueWritesNoRowPastItsOwn) {
  TG_REQUIRE_CUDA();
  const Device dev = cuda_device(0);
  constexpr int64_t kSpare = 256;
  for (DType dtype : {kFloat32, kBFloat16}) {
    for (const auto& [k, m] : std::vector<std::array<int64_t, 2>>{{128, 256}, {256, 256}, {256, 10}}) {
      for (int64_t n : {1, 31, 79, 96, 100, 160, 223, 224, 255, 256}) {
        SCOPED_TRACE(::testing::Message() << dtype_name(dtype) << " " << n << "x" << k << " @ " << k << "x" << m);
        const int64_t words = relu_mask_row_bits(m) / 32;
        const Tensor x = randn({n, k}, {.device = dev}).to(dtype), w = randn({m, k}, {.device = dev}).to(dtype);
        const Tensor b = randn({m}, {.device = dev}).to(dtype);
        const Tensor y_all = full({n + kSpare, m}, 7.0, {.dtype = dtype, .device = dev});
        const Tensor mask_all = full({n + kSpare, words}, -1, {.dtype = kInt32, .device = dev});
        const Tensor y = y_all.narrow(0, 0, n), mask = mask_all.narrow(0, 0, n);
        if (!relu_mask_epilogue(x, w, b, y, mask)) continue;
        EXPECT_TRUE(mask_matches_output(y, mask));
        EXPECT_TRUE(equal(y_all.narrow(0, n, kSpare).cpu(), full({kSpare, m}, 7.0, {.dtype = dtype})))
            << "the product wrote past its " << n << " rows";
        EXPECT_TRUE(equal(mask_all.narrow(0, n, kSpare).cpu(), full({kSpare, words}, -1, {.dtype = kInt32})))
            << "the mask was written past its " << n << " rows";
      }
    }
  }
}
#endif

// An MLP with `act` compiled with every fusion on and off, under both backends: the loss and every
// parameter's gradient equal eager mode's.
void expect_fused_mlp_matches_eager(const std::string& act, bool bf16) {
  const Device dev = cuda_device(0);
  manual_seed(0);
  auto model = std::make_shared<nn::Sequential>();
  auto activation = [&]() -> std::shared_ptr<nn::Module> {
    if (act == "relu") return std::make_shared<nn::ReLU>();
    return std::make_shared<nn::GELU>("tanh");
  };
  model->push_back(std::make_shared<nn::Linear>(64, 128));
  model->push_back(activation());
  model->push_back(std::make_shared<nn::Linear>(128, 256));
  model->push_back(activation());
  model->push_back(std::make_shared<nn::Linear>(256, 16));
  model->to(dev);
  auto fn = [model, bf16](const TensorList& in) {
    if (!bf16) return TensorList{cross_entropy((*model)(in[0]), in[1])};
    AutocastGuard autocast(cuda_device(0), kBFloat16);
    return TensorList{cross_entropy((*model)(in[0]), in[1])};
  };
  const Tensor x = randn({32, 64}, {.device = dev}), y = randint(0, 16, {32}, {.device = dev});
  const TensorList eager = testing::loss_and_grads(*model, fn({x, y})[0]);
  const double tol = bf16 ? 2e-2 : 1e-4;
  // Epilogues off; on (the activation's gradient and the bias gradient as one node); on with the
  // gradient epilogues (the product before them joins that node).
  for (int level = 0; level < 3; ++level)
    for (const char* backend : {"aot_eager", "cudagraphs"}) {
      Compiled<decltype(fn)> compiled(
          fn, {.backend = backend, .fuse_epilogues = level > 0, .fuse_gradient_epilogues = level > 1});
      for (int call = 0; call < 3; ++call) {
        const TensorList got = testing::loss_and_grads(*model, compiled(TensorList{x, y})[0]);
        for (size_t k = 0; k < got.size(); ++k)
          expect_close(got[k], eager[k], tol, tol * 0.1);
      }
      const auto& bw = compiled.counters().backward_ops;
      auto count = [&bw](const std::string& op) { return bw.count(op) ? bw.at(op) : 0; };
      const std::string pair = act == "relu" ? "relu_backward_bias_grad" : "gelu_tanh_backward_bias_grad";
      EXPECT_EQ(count(pair), level == 1 ? 2 : 0) << act << " " << backend << " level " << level;
      EXPECT_EQ(count("mm_" + pair), level == 2 ? 2 : 0) << act << " " << backend << " level " << level;
    }
}

TEST(LinearEpilogues, ReluMlpCompiledMatchesEager) {
  TG_REQUIRE_CUDA();
  expect_fused_mlp_matches_eager("relu", false);
  expect_fused_mlp_matches_eager("relu", true);
}

TEST(LinearEpilogues, GeluMlpCompiledMatchesEager) {
  TG_REQUIRE_CUDA();
  expect_fused_mlp_matches_eager("gelu", false);
  expect_fused_mlp_matches_eager("gelu", true);
}

}  // namespace
}  // namespace tg
