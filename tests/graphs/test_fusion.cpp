// Fusions in compiled graphs: linear + relu become one linear_relu (a cuBLASLt epilogue on CUDA; the
// other epilogues are in test_linear_epilogues), the gradients of a split's pieces one cat, parameter
// casts one multi_tensor_cast, residual adds and layer_norm one add_layer_norm;
// fused and unfused graphs agree with eager mode in values and gradients.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <string>

#include "graphs/testing/parity.h"
#include "ops/elementwise/elementwise.h"
#include "ops/linalg/bias_grad.h"
#include "ops/shape/split.h"
#include "support/test_support.h"

namespace tg {
namespace {

// How many nodes of op `name` a compiled graph holds (its counters' op counts).
int op_count(const std::map<std::string, int>& ops, const std::string& name) {
  return ops.count(name) ? ops.at(name) : 0;
}

TEST(LinearRelu, GradcheckAndErrors) {
  testing::expect_gradcheck([](const TensorList& in) { return linear_relu(in[0], in[1], in[2]); },
                            {testing::random_tensor({4, 3}, kFloat64, true), testing::random_tensor({5, 3}, kFloat64, true),
                             testing::random_tensor({5}, kFloat64, true)});
  testing::expect_gradcheck([](const TensorList& in) { return linear_relu(in[0], in[1]); },
                            {testing::random_tensor({2, 4, 3}, kFloat64, true),
                             testing::random_tensor({6, 3}, kFloat64, true)});
  EXPECT_THROW_MSG(linear_relu(randn({2, 3}), randn({4, 5})), "mat1 and mat2 shapes cannot be multiplied (2x3 and 5x4)");
  Tensor x = randn({7, 3}), w = randn({4, 3}), b = randn({4});
  testing::expect_close(linear_relu(x, w, b), relu(linear(x, w, b)));
}

TEST(ReluBackwardBiasGrad, MatchesTheUnfusedOpsAndGradchecks) {
  Tensor g = randn({6, 5}), y = randn({6, 5});
  auto [h, db] = relu_backward_bias_grad(g, y);
  testing::expect_close(h, threshold_backward(g, y));
  testing::expect_close(db, sum_to(threshold_backward(g, y), {5}), 1e-5, 1e-6);
  auto [h3, db3] = relu_backward_bias_grad(randn({2, 3, 4}), randn({2, 3, 4}));
  EXPECT_EQ(db3.sizes(), (Shape{4}));
  const Tensor mask = testing::random_tensor({4, 3});
  testing::expect_gradcheck([mask](const TensorList& in) {
    auto [a, b] = relu_backward_bias_grad(in[0], mask);
    return a.sum() * 0.5 + (b * b).sum();
  }, {testing::random_tensor({4, 3}, kFloat64, true)});
  EXPECT_THROW_MSG(relu_backward_bias_grad(randn({2, 3}), randn({3, 2})),
                   "gradient of shape [2, 3] and ReLU output of shape [3, 2]: expected equal shapes");
}

TEST(ReluBackwardBiasGrad, CudaMatchesCpu) {
  TG_REQUIRE_CUDA();
  for (const Shape& s : {Shape{64, 256}, Shape{3, 70}, Shape{256, 4096}, Shape{2, 5, 33}})
    testing::expect_cuda_matches_cpu([](const TensorList& in) {
      auto [h, db] = relu_backward_bias_grad(in[0], in[1]);
      return cat({h.reshape({-1}), db});
    }, {randn(s), randn(s)}, 1e-4, 1e-4);
}

TEST(GeluTanhBackwardBiasGrad, MatchesTheUnfusedOpsAndGradchecks) {
  Tensor g = randn({6, 5}), x = randn({6, 5}) * 3.0;
  auto [h, db] = gelu_tanh_backward_bias_grad(g, x);
  testing::expect_close(h, gelu_backward(g, x, true));
  testing::expect_close(db, sum_to(gelu_backward(g, x, true), {5}), 1e-5, 1e-6);
  auto [h3, db3] = gelu_tanh_backward_bias_grad(randn({2, 3, 4}), randn({2, 3, 4}));
  EXPECT_EQ(db3.sizes(), (Shape{4}));
  // Both inputs take gradients: g through gelu', x through g * gelu''.
  testing::expect_gradcheck([](const TensorList& in) {
    auto [a, b] = gelu_tanh_backward_bias_grad(in[0], in[1]);
    return a.sum() * 0.5 + (b * b).sum();
  }, {testing::random_tensor({4, 3}, kFloat64, true), testing::random_tensor({4, 3}, kFloat64, true)});
  EXPECT_THROW_MSG(gelu_tanh_backward_bias_grad(randn({2, 3}), randn({3, 2})),
                   "gradient of shape [2, 3] and GELU input of shape [3, 2]: expected equal shapes");
}

// On CUDA the fused kernel writes the elementwise kernel's bits, and sums them as sum_to_size does
// up to the order of the additions; rows of 16-byte vectors and odd widths alike.
TEST(GeluTanhBackwardBiasGrad, CudaMatchesTheSeparateKernels) {
  TG_REQUIRE_CUDA();
  const Device dev = cuda_device(0);
  for (DType dtype : {kFloat32, kBFloat16, kFloat16})
    for (const Shape& s : {Shape{64, 256}, Shape{3, 70}, Shape{1024, 3072}, Shape{2, 5, 33}, Shape{8, 4, 24}}) {
      SCOPED_TRACE(::testing::Message() << dtype_name(dtype) << " " << shape_str(s));
      const Tensor g = randn(s, {.device = dev}).to(dtype), x = (randn(s, {.device = dev}) * 4.0).to(dtype);
      auto [h, db] = gelu_tanh_backward_bias_grad(g, x);
      const Tensor want = gelu_backward(g, x, true);
      EXPECT_TRUE(equal(h, want));
      const double tol = dtype == kFloat32 ? 1e-5 : 1e-2;
      testing::expect_close(db.to(kFloat32), sum_to(want, {s.back()}).to(kFloat32), tol, tol);
    }
  for (const Shape& s : {Shape{64, 256}, Shape{3, 70}})
    testing::expect_cuda_matches_cpu([](const TensorList& in) {
      auto [h, db] = gelu_tanh_backward_bias_grad(in[0], in[1]);
      return cat({h.reshape({-1}), db});
    }, {randn(s), randn(s)}, 1e-4, 1e-4);
}

// A NaN before the ReLU stays NaN after it (as relu keeps it), fused or not, on every device.
void expect_nan_propagates(Device device) {
  Tensor x = randn({4, 8}, {.device = device}), w = randn({6, 8}, {.device = device}), b = randn({6}, {.device = device});
  x.select(0, 1).select(0, 2).fill_(std::numeric_limits<double>::quiet_NaN());
  const std::vector<double> fused = linear_relu(x, w, b).cpu().to_vector<double>();
  const std::vector<double> plain = relu(linear(x, w, b)).cpu().to_vector<double>();
  ASSERT_EQ(fused.size(), plain.size());
  for (size_t i = 0; i < fused.size(); ++i) {
    EXPECT_EQ(std::isnan(fused[i]), std::isnan(plain[i])) << "element " << i << " on " << device.str();
    if (!std::isnan(plain[i])) EXPECT_NEAR(fused[i], plain[i], 1e-4);
  }
}

TEST(LinearRelu, NanStaysNan) {
  expect_nan_propagates(kCPU);
  if (cuda_is_available()) expect_nan_propagates(cuda_device(0));
}

TEST(LinearRelu, CudaMatchesCpu) {
  TG_REQUIRE_CUDA();
  testing::expect_cuda_matches_cpu([](const TensorList& in) { return linear_relu(in[0], in[1], in[2]); },
                                   {randn({64, 128}), randn({256, 128}), randn({256})}, 1e-4, 1e-5);
  testing::expect_cuda_matches_cpu([](const TensorList& in) { return linear_relu(in[0], in[1]); },
                                   {randn({5, 7}), randn({3, 7})}, 1e-4, 1e-5);
}

// An MLP's loss, compiled with and without the fusion: equal to eager mode, and the forward graph
// holds linear_relu exactly when the fusion is on.
void expect_fused_and_unfused_match_eager(Device device, const std::string& backend) {
  manual_seed(0);
  auto model = std::make_shared<nn::Sequential>();
  model->push_back(std::make_shared<nn::Linear>(32, 64));
  model->push_back(std::make_shared<nn::ReLU>());
  model->push_back(std::make_shared<nn::Linear>(64, 64));
  model->push_back(std::make_shared<nn::ReLU>());
  model->push_back(std::make_shared<nn::Linear>(64, 10));
  model->to(device);
  const TensorList params = model->parameters();
  auto fn = [model](const TensorList& in) { return TensorList{cross_entropy((*model)(in[0]), in[1])}; };
  Tensor x = randn({16, 32}, {.device = device}), y = randint(0, 10, {16}, {.device = device});
  const TensorList eager = testing::loss_and_grads(*model, fn({x, y})[0]);
  for (bool fuse : {true, false}) {
    Compiled<decltype(fn)> compiled(fn, {.backend = backend, .fuse_epilogues = fuse});
    for (int call = 0; call < 3; ++call) {
      const TensorList got = testing::loss_and_grads(*model, compiled(TensorList{x, y})[0]);
      for (size_t k = 1; k <= params.size(); ++k) testing::expect_close(got[k], eager[k], 1e-4, 1e-5);  // the grads
    }
    testing::expect_compiled_matches_eager(fn, {x, y}, {.compile = {.backend = backend, .fuse_epilogues = fuse},
                                                        .rtol = 1e-4, .atol = 1e-5, .calls = 3});
    // (The backward products' gradient epilogues, off by default, are tested in test_linear_epilogues.)
    const auto& fw = compiled.counters().forward_ops;
    EXPECT_EQ(op_count(fw, "linear_relu"), fuse ? 2 : 0) << backend;
    EXPECT_EQ(op_count(fw, "relu"), fuse ? 0 : 2) << backend;
    const auto& bw = compiled.counters().backward_ops;
    EXPECT_EQ(op_count(bw, "relu_backward_bias_grad"), fuse ? 2 : 0) << backend;
    EXPECT_EQ(op_count(bw, "threshold_backward"), fuse ? 0 : 2) << backend;
  }
}

TEST(Fusion, LinearReluOnTheCpu) { expect_fused_and_unfused_match_eager(kCPU, "aot_eager"); }

TEST(Fusion, LinearReluUnderCudaGraphs) {
  TG_REQUIRE_CUDA();
  expect_fused_and_unfused_match_eager(cuda_device(0), "cudagraphs");
}

// A packed projection split into three pieces that are used unevenly (one piece twice, one
// through a view): the backward's zero-filled slice copies and their sum become one cat.
void expect_split_gradients_merged(Device device, const std::string& backend) {
  auto fn = [](const TensorList& in) {
    const TensorList qkv = split(matmul(in[0], in[1]), 4, -1);
    const Tensor y = qkv[0] * qkv[1] + qkv[2].transpose(0, 1).sum({0}).unsqueeze(1) * qkv[0];
    return TensorList{y.sum()};
  };
  Tensor x = randn({6, 5}, {.device = device}).requires_grad_(true);
  Tensor w = randn({5, 12}, {.device = device}).requires_grad_(true);
  for (bool merge : {true, false}) {
    const CompileOptions options{.backend = backend, .merge_split_gradients = merge};
    testing::expect_compiled_matches_eager(fn, {x, w}, {.compile = options, .rtol = 1e-5, .atol = 1e-6, .calls = 2});
    Compiled<decltype(fn)> compiled(fn, options);
    compiled(TensorList{x, w})[0].backward();
    const auto& bw = compiled.counters().backward_ops;
    EXPECT_EQ(op_count(bw, "slice_backward"), merge ? 0 : 3) << backend;
    EXPECT_EQ(op_count(bw, "cat"), merge ? 1 : 0) << backend;
  }
}

TEST(Fusion, SplitGradientsOnTheCpu) { expect_split_gradients_merged(kCPU, "aot_eager"); }

TEST(Fusion, SplitGradientsUnderCudaGraphs) {
  TG_REQUIRE_CUDA();
  expect_split_gradients_merged(cuda_device(0), "cudagraphs");
}

TEST(Fusion, PartialSplitGradientsKeepTheirSlices) {
  // Two of three pieces used: the gradients do not tile the dim, so no cat.
  auto fn = [](const TensorList& in) {
    const TensorList parts = split(in[0] * 2, 2, 0);
    return TensorList{(parts[0] * parts[2]).sum()};
  };
  Tensor x = randn({6, 3}).requires_grad_(true);
  testing::expect_compiled_matches_eager(fn, {x}, {.compile = {.backend = "aot_eager"}, .calls = 2});
  Compiled<decltype(fn)> compiled(fn, {.backend = "aot_eager"});
  compiled(TensorList{x})[0].backward();
  const auto& bw = compiled.counters().backward_ops;
  EXPECT_EQ(bw.count("cat"), 0u);
  EXPECT_EQ(bw.at("slice_backward"), 2);
}

// The casts of a function's inputs (autocast's parameter casts) become one multi_tensor_cast in the
// forward graph, and the casts of the gradients it returns one in the backward graph.
void expect_parameter_casts_batched(Device device, const std::string& backend) {
  auto fn = [](const TensorList& in) {
    const Tensor h = relu(matmul(in[0].to(kBFloat16), in[1].to(kBFloat16)));
    const Tensor y = matmul(h, in[2].to(kBFloat16)) + in[3].to(kBFloat16);
    return TensorList{y.to(kFloat32).square().sum()};
  };
  const TensorList in{randn({8, 16}, {.device = device}).requires_grad_(true),
                      randn({16, 32}, {.device = device}).requires_grad_(true),
                      randn({32, 4}, {.device = device}).requires_grad_(true),
                      randn({4}, {.device = device}).requires_grad_(true)};
  for (bool batch : {true, false}) {
    // Without elementwise fusion, which on CUDA would take the output's cast into a fused kernel.
    const CompileOptions options{.backend = backend, .fuse_elementwise = false, .batch_parameter_casts = batch};
    testing::expect_compiled_matches_eager(fn, in, {.compile = options, .rtol = 1e-2, .atol = 1e-2, .calls = 2});
    Compiled<decltype(fn)> compiled(fn, options);
    compiled(in)[0].backward();
    const auto& fw = compiled.counters().forward_ops;
    const auto& bw = compiled.counters().backward_ops;
    EXPECT_EQ(op_count(fw, "multi_tensor_cast"), batch ? 1 : 0) << backend;
    EXPECT_EQ(op_count(fw, "_to_copy"), batch ? 1 : 5) << backend;  // the output's cast to float32 stays
    EXPECT_EQ(op_count(bw, "multi_tensor_cast"), batch ? 1 : 0) << backend;
  }
}

TEST(Fusion, ParameterCastsOnTheCpu) { expect_parameter_casts_batched(kCPU, "aot_eager"); }

TEST(Fusion, ParameterCastsUnderCudaGraphs) {
  TG_REQUIRE_CUDA();
  expect_parameter_casts_batched(cuda_device(0), "cudagraphs");
}

// float32_parameter_gradients: under bf16 autocast the weights' gradients come out of their products
// in float32 (mm with out_dtype), with no cast left for them in the backward graph. Eager's are
// those sums rounded to bfloat16, so the two agree to bfloat16's rounding, and the compiled ones
// are at least as close to the float64 gradient.
void expect_parameter_gradients_in_float32(Device device, const std::string& backend) {
  auto fn = [](const TensorList& in) {
    AutocastGuard autocast(in[0].device(), kBFloat16);
    const Tensor h = relu(matmul(in[0], in[1]));
    return TensorList{matmul(h, in[2]).to(kFloat32).square().sum()};
  };
  manual_seed(21);
  const TensorList in{randn({32, 16}, {.device = device}), (randn({16, 64}, {.device = device}) * 0.3).requires_grad_(true),
                      (randn({64, 8}, {.device = device}) * 0.3).requires_grad_(true)};
  // Without elementwise fusion, which on CUDA would take the output gradient's cast into a fused kernel.
  const CompileOptions options{.backend = backend, .fuse_elementwise = false, .float32_parameter_gradients = true};
  testing::expect_compiled_matches_eager(fn, in, {.compile = options, .rtol = 1e-2, .atol = 1e-2, .calls = 2});
  Compiled<decltype(fn)> compiled(fn, options);
  const TensorList params{in[1], in[2]};
  const TensorList wide = grad(compiled(in), params);
  const TensorList eager = grad(fn(in), params);
  // The float64 truth of the same bfloat16 operands: the program without autocast on their values.
  const TensorList wide_in{in[0].to(kBFloat16).to(kFloat64), in[1].detach().to(kBFloat16).to(kFloat64).requires_grad_(true),
                           in[2].detach().to(kBFloat16).to(kFloat64).requires_grad_(true)};
  const Tensor h = relu(matmul(wide_in[0], wide_in[1])).to(kBFloat16).to(kFloat64);
  const TensorList truth = grad({matmul(h, wide_in[2]).square().sum()}, {wide_in[1], wide_in[2]});
  for (size_t k = 0; k < 2; ++k) {
    EXPECT_EQ(wide[k].dtype(), kFloat32);
    const double wide_error = (wide[k].to(kFloat64) - truth[k]).abs().max().item<double>();
    const double eager_error = (eager[k].to(kFloat64) - truth[k]).abs().max().item<double>();
    EXPECT_LE(wide_error, eager_error) << "parameter " << k;
  }
  const auto& bw = compiled.counters().backward_ops;
  EXPECT_EQ(op_count(bw, "multi_tensor_cast"), 0) << backend;
  EXPECT_EQ(op_count(bw, "_to_copy"), 1) << backend;  // the output gradient's, to bfloat16
  EXPECT_GE(op_count(bw, "mm"), 2) << backend;
}

TEST(Fusion, ParameterGradientsInFloat32OnTheCpu) { expect_parameter_gradients_in_float32(kCPU, "aot_eager"); }

TEST(Fusion, ParameterGradientsInFloat32UnderCudaGraphs) {
  TG_REQUIRE_CUDA();
  expect_parameter_gradients_in_float32(cuda_device(0), "cudagraphs");
}

// A pre-norm residual block under bf16 autocast: s = x + f(x) (float32 + bfloat16), layer_norm(s)
// cast for the next product, and s read again by the next residual add. On CUDA the add, the norm
// and the cast become one add_layer_norm node, and in the backward the norm's gradient, the
// residual gradient's sum and the casts around them one add_layer_norm_backward; on the CPU the
// graphs keep the separate ops. Values and gradients equal eager mode's either way.
void expect_residual_norms_fused(Device device, const std::string& backend) {
  auto fn = [](const TensorList& in) {
    AutocastGuard autocast(in[0].device(), kBFloat16);
    const Tensor s = in[0] + matmul(in[0], in[1]);
    const Tensor y = s + matmul(layer_norm(s, {32}, in[2], in[3]), in[4]);
    return TensorList{y.square().mean()};
  };
  manual_seed(11);
  const TensorList in{randn({64, 32}, {.device = device}).requires_grad_(true),
                      (randn({32, 32}, {.device = device}) * 0.2).requires_grad_(true),
                      (randn({32}, {.device = device}) * 0.1 + 1.0).requires_grad_(true),
                      randn({32}, {.device = device}).requires_grad_(true),
                      (randn({32, 32}, {.device = device}) * 0.2).requires_grad_(true)};
  const bool cuda = device.is_cuda();
  for (bool fuse : {true, false}) {
    const CompileOptions options{.backend = backend, .fuse_elementwise = false, .fuse_add_layer_norm = fuse};
    testing::expect_compiled_matches_eager(fn, in, {.compile = options, .rtol = 1e-4, .atol = 1e-4, .calls = 2});
    Compiled<decltype(fn)> compiled(fn, options);
    compiled(in)[0].backward();
    const auto& fw = compiled.counters().forward_ops;
    const auto& bw = compiled.counters().backward_ops;
    EXPECT_EQ(op_count(fw, "add_layer_norm"), fuse && cuda ? 1 : 0) << backend;
    EXPECT_EQ(op_count(fw, "layer_norm"), fuse && cuda ? 0 : 1) << backend;
    EXPECT_EQ(op_count(bw, "add_layer_norm_backward"), fuse && cuda ? 1 : 0) << backend;
    EXPECT_EQ(op_count(bw, "layer_norm"), fuse && cuda ? 0 : 1) << backend;
  }
}

TEST(Fusion, ResidualNormsStaySeparateOnTheCpu) { expect_residual_norms_fused(kCPU, "aot_eager"); }

TEST(Fusion, ResidualNormsUnderCudaGraphs) {
  TG_REQUIRE_CUDA();
  expect_residual_norms_fused(cuda_device(0), "cudagraphs");
}

// An LM head written with plain ops (linear, a reshape to rows, cross_entropy) becomes one
// linear_cross_entropy_grads_ahead node forward and one linear_cross_entropy_grads_scale node
// backward where its logits reach the size limit: no product of the logits' gradient remains in the
// backward. Values and gradients equal eager mode's (a loss gradient of 2 checks the scaling).
void expect_lm_head_fused(Device device, const std::string& backend) {
  constexpr int64_t kV = 40, kD = 6;
  auto head = [](const TensorList& in, Reduction r, bool with_bias) {
    const Tensor logits = linear(tanh(in[0]), in[2], with_bias ? in[3] : Tensor());
    return cross_entropy(logits.reshape({-1, kV}), in[1].reshape({-1}), {.ignore_index = 3, .reduction = r});
  };
  manual_seed(12);
  for (DType dtype : {kFloat64, kFloat32}) {
    const TensorList in{randn({2, 5, kD}, {.dtype = dtype, .device = device}).requires_grad_(true),
                        randint(0, kV, {2, 5}, {.device = device}),
                        (randn({kV, kD}, {.dtype = dtype, .device = device}) * 0.3).requires_grad_(true),
                        randn({kV}, {.dtype = dtype, .device = device}).requires_grad_(true)};
    const double tol = dtype == kFloat64 ? 1e-12 : 1e-5;
    for (Reduction r : {Reduction::Mean, Reduction::Sum}) {
      for (bool with_bias : {true, false}) {
        SCOPED_TRACE(::testing::Message() << backend << " " << dtype_name(dtype) << " " << reduction_name(r)
                                          << (with_bias ? " with bias" : ""));
        auto fn = [&](const TensorList& x) { return TensorList{head(x, r, with_bias) * 2.0}; };
        const CompileOptions options{.backend = backend, .fuse_linear_cross_entropy_bytes = 1};
        testing::expect_compiled_matches_eager(fn, in, {.compile = options, .rtol = tol, .atol = tol, .calls = 2});
        Compiled<decltype(fn)> compiled(fn, options);
        compiled(in)[0].backward();
        const auto& fw = compiled.counters().forward_ops;
        const auto& bw = compiled.counters().backward_ops;
        EXPECT_EQ(op_count(fw, "linear_cross_entropy_grads_ahead"), 1);
        EXPECT_EQ(op_count(fw, "linear") + op_count(fw, "cross_entropy"), 0);
        EXPECT_EQ(op_count(bw, "linear_cross_entropy_grads_scale"), 1);
        EXPECT_EQ(op_count(bw, "cross_entropy_backward") + op_count(bw, "mm"), 0);
      }
    }
    // Left alone: logits under the size limit, logits the function also returns, a loss per row.
    auto plain = [&](const TensorList& x) { return TensorList{head(x, Reduction::Mean, true)}; };
    auto with_logits = [&](const TensorList& x) {
      const Tensor logits = linear(tanh(x[0]), x[2], x[3]);
      return TensorList{cross_entropy(logits.reshape({-1, kV}), x[1].reshape({-1})), logits};
    };
    auto per_row = [&](const TensorList& x) { return TensorList{head(x, Reduction::None, true).sum()}; };
    const CompileOptions on{.backend = backend, .fuse_linear_cross_entropy_bytes = 1};
    Compiled<decltype(plain)> small(plain, CompileOptions{.backend = backend});  // the default limit: 8 MiB
    Compiled<decltype(with_logits)> read_twice(with_logits, on);
    Compiled<decltype(per_row)> unreduced(per_row, on);
    small(in)[0].backward();
    read_twice(in)[0].backward();
    unreduced(in)[0].backward();
    EXPECT_EQ(op_count(small.counters().forward_ops, "cross_entropy"), 1);
    EXPECT_EQ(op_count(read_twice.counters().forward_ops, "cross_entropy"), 1);
    EXPECT_EQ(op_count(unreduced.counters().forward_ops, "cross_entropy"), 1);
  }
}

TEST(Fusion, LmHeadOnTheCpu) { expect_lm_head_fused(kCPU, "aot_eager"); }

TEST(Fusion, LmHeadUnderCudaGraphs) {
  TG_REQUIRE_CUDA();
  expect_lm_head_fused(cuda_device(0), "cudagraphs");
}

// Under bfloat16 autocast (the head's products in bfloat16, the loss in float32 through a cast of
// the logits) the rewrite holds too, with float32 gradients of the float32 parameters.
TEST(Fusion, LmHeadUnderAutocast) {
  for (Device device : {Device(kCPU), cuda_is_available() ? cuda_device(0) : Device(kCPU)}) {
    SCOPED_TRACE(device.str());
    manual_seed(13);
    auto fn = [](const TensorList& in) {
      AutocastGuard autocast(in[0].device(), kBFloat16);
      const Tensor logits = linear(in[0], in[2], in[3]);
      return TensorList{cross_entropy(logits.reshape({-1, 64}), in[1].reshape({-1}))};
    };
    const TensorList in{randn({4, 8, 16}, {.device = device}).requires_grad_(true),
                        randint(0, 64, {4, 8}, {.device = device}),
                        (randn({64, 16}, {.device = device}) * 0.3).requires_grad_(true),
                        randn({64}, {.device = device}).requires_grad_(true)};
    const CompileOptions options{.backend = device.is_cuda() ? "cudagraphs" : "aot_eager",
                                 .fuse_linear_cross_entropy_bytes = 1};
    testing::expect_compiled_matches_eager(fn, in, {.compile = options, .rtol = 2e-2, .atol = 2e-3, .calls = 2});
    Compiled<decltype(fn)> compiled(fn, options);
    compiled(in)[0].backward();
    EXPECT_EQ(op_count(compiled.counters().forward_ops, "linear_cross_entropy_grads_ahead"), 1);
    EXPECT_EQ(op_count(compiled.counters().backward_ops, "linear_cross_entropy_grads_scale"), 1);
  }
}

}  // namespace
}  // namespace tg
