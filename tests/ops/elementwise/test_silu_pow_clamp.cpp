// silu, softplus, pow with a tensor exponent, clamp with tensor bounds, and the autocast float32 list
// of the elementwise ops: values and gradients against PyTorch's, first and second derivatives,
// errors, and CPU-vs-CUDA agreement.
#include <cmath>
#include <limits>
#include <vector>

#include "graphs/capture/fake.h"
#include "graphs/capture/functional_ops.h"
#include "graphs/compile.h"
#include "graphs/passes/elementwise_fusion.h"
#include "ops/core/dispatch.h"
#include "ops/elementwise/fused_elementwise.h"
#include "ops/elementwise/fused_elementwise_codegen.h"
#include "support/test_support.h"
#include "support/values.h"
#include "tensor/cuda_runtime.h"

#ifdef TG_WITH_CUDA
#include "ops/elementwise/cuda/nvrtc_compiler.h"
#endif

namespace tg {
namespace {

using testing::expect_close;
using testing::expect_cuda_matches_cpu;
using testing::expect_gradcheck;
using testing::expect_gradgradcheck;
using testing::expect_values;
using testing::kNaN;
using testing::make;
using testing::random_tensor;
using L = const TensorList&;

const double kInf = std::numeric_limits<double>::infinity();

// The gradient of sum(fn(x) * weights) w.r.t. each of `leaves`.
TensorList grads_of(const Tensor& out, const TensorList& leaves) {
  sum(out).backward();
  TensorList g;
  for (const Tensor& l : leaves) g.push_back(l.grad());
  return g;
}

Tensor leaf(std::vector<double> v, Shape s = {}) {
  Tensor t = make(std::move(v), kFloat64, std::move(s));
  t.requires_grad_(true);
  return t;
}

const std::vector<double> kActIn = {-30, -2, -0.5, 0, 0.5, 2, 15, 30};

// The same values every other element of a wider tensor (not contiguous).
Tensor strided_copy(const Tensor& x) {
  Shape big = x.sizes();
  big.back() *= 2;
  Tensor storage = zeros(big, {.dtype = x.dtype()});
  Tensor v = storage.slice(-1, 0, std::nullopt, 2);
  v.copy_(x);
  return v;
}

// ---- silu and softplus -----------------------------------------------------------------------

TEST(Silu, ValuesAndGradientMatchPyTorch) {
  Tensor x = leaf(kActIn);
  const Tensor y = silu(x);
  // torch.nn.functional.silu(torch.tensor([-30., -2, -0.5, 0, 0.5, 2, 15, 30], dtype=torch.float64))
  expect_values(y, {-2.80728689065e-12, -0.238405844044, -0.188770334399, 0, 0.311229665601, 1.76159415596,
                    14.9999954115, 30}, 1e-10);
  // torch.autograd.grad(F.silu(x).sum(), x)
  expect_values(grads_of(y, {x})[0], {-2.71371066096e-12, -0.0907842487849, 0.260038812697, 0.5, 0.739961187303,
                                      1.09078424878, 1.00000428263, 1}, 1e-10);
}

TEST(Softplus, ValuesAndGradientMatchPyTorch) {
  // F.softplus(x)
  expect_values(softplus(make(kActIn)), {9.35762296884e-14, 0.126928011043, 0.47407698418, 0.69314718056,
                                         0.97407698418, 2.12692801104, 15.0000003059, 30}, 1e-10);
  Tensor x = leaf(kActIn);
  const Tensor y = softplus(x, 2, 1);
  // F.softplus(x, beta=2, threshold=1): x itself where 2x > 1
  expect_values(y, {4.37825538135e-27, 0.0090749639589, 0.156630843759, 0.34657359028, 0.656630843759, 2, 15, 30},
                1e-10);
  expect_values(grads_of(y, {x})[0], {8.7565107627e-27, 0.0179862099621, 0.26894142137, 0.5, 0.73105857863, 1, 1, 1},
                1e-10);
}

TEST(SiluSoftplus, FirstAndSecondDerivatives) {
  const Tensor x = random_tensor({3, 5}, kFloat64, true, -4, 4);
  expect_gradcheck([](L v) { return silu(v[0]); }, {x});
  expect_gradgradcheck([](L v) { return silu(v[0]); }, {x});
  for (double beta : {1.0, 0.5, 3.0}) {
    expect_gradcheck([beta](L v) { return softplus(v[0], beta, 2.5); }, {x});
    expect_gradgradcheck([beta](L v) { return softplus(v[0], beta, 2.5); }, {x});
  }
  // Third order through silu_backward's own gradient.
  const Tensor g = random_tensor({3, 5}, kFloat64, true);
  expect_gradgradcheck([](L v) { return silu_backward(v[0], v[1]); }, {g, x});
}

TEST(SiluSoftplus, StridedFloat32AndEmptyInputs) {
  const Tensor x = random_tensor({4, 6}, kFloat32, false, -5, 5);
  const Tensor xs = strided_copy(x);
  ASSERT_FALSE(xs.is_contiguous());
  expect_close(silu(xs), silu(x));
  expect_close(softplus(xs, 2, 3), softplus(x, 2, 3));
  expect_close(silu(x), mul(x, sigmoid(x)), 1e-6, 1e-6);
  EXPECT_EQ(silu(zeros({0, 3})).sizes(), (Shape{0, 3}));
  EXPECT_EQ(softplus(zeros({0})).numel(), 0);
  EXPECT_EQ(silu(x.to(kBFloat16)).dtype(), kBFloat16);
}

TEST(SiluSoftplus, Errors) {
  EXPECT_THROW_MSG(silu(zeros({2}, {.dtype = kInt64})), "[silu] expected a floating point tensor, got int64");
  EXPECT_THROW_MSG(softplus(zeros({2}, {.dtype = kInt32})), "[softplus] expected a floating point tensor, got int32");
}

TEST(SiluSoftplus, Modules) {
  nn::SiLU act;
  const Tensor x = random_tensor({2, 3}, kFloat64);
  expect_close(act.forward(x), silu(x));
  nn::Softplus sp(2.0, 5.0);
  expect_close(sp.forward(x), softplus(x, 2.0, 5.0));
  EXPECT_EQ(sp.type_name(), "Softplus");
  EXPECT_NE(sp.extra_repr().find("beta=2"), std::string::npos) << sp.extra_repr();
}

// ---- pow with a tensor exponent ----------------------------------------------------------------

TEST(PowTensor, ValuesAndGradientsMatchPyTorch) {
  Tensor a = leaf({0, 0, 2, 0.5, 3, 1.5, 0, 4}, {2, 4});
  Tensor b = leaf({2, 0, -1.5, 0.5});  // broadcast over a's rows
  const Tensor out = pow(a, b);
  // torch.pow(a, b) and torch.autograd.grad(out.sum(), (a, b))
  expect_values(out, {0, 1, 0.353553390593, 0.707106781187, 9, 1, kInf, 2}, 1e-10);
  const TensorList g = grads_of(out, {a, b});
  expect_values(g[0], {0, 0, -0.265165042945, 0.707106781187, 6, 0, -kInf, 0.25}, 1e-10);
  expect_values(g[1], {9.88751059801, 0.405465108108, -kInf, 2.28245965051}, 1e-10);
}

TEST(PowTensor, ScalarBaseValuesAndGradients) {
  Tensor e = leaf({0, 1, 2.5, -1});
  Tensor out = pow(2.0, e);
  // torch.pow(2.0, e), and its gradient log(2) * 2^e
  expect_values(out, {1, 2, 5.65685424949, 0.5}, 1e-10);
  expect_values(grads_of(out, {e})[0], {0.69314718056, 1.38629436112, 3.92103257387, 0.34657359028}, 1e-10);
  Tensor e0 = leaf({0, 1, 2.5, -1});
  out = pow(0.0, e0);
  // torch.pow(0.0, e): the gradient is 0 where e >= 0
  expect_values(out, {1, 0, 0, kInf});
  expect_values(grads_of(out, {e0})[0], {0, 0, 0, -kInf});
  EXPECT_EQ(pow(2, make({1, 2}, kInt64)).dtype(), kInt64);    // torch.pow(2, int tensor) is int64
  EXPECT_EQ(pow(2.5, make({1, 2}, kInt64)).dtype(), kFloat32);
}

TEST(PowTensor, IntegerSemanticsAndPromotion) {
  // torch.pow(torch.tensor([2, -1, 1, 3, -2]), torch.tensor([-1, -3, -2, 2, 3]))
  expect_values(pow(make({2, -1, 1, 3, -2}, kInt64), make({-1, -3, -2, 2, 3}, kInt64)), {0, -1, 1, 9, -8});
  expect_values(pow(make({2, -1, 1, 3, -2}, kInt32), make({-1, -3, -2, 2, 3}, kInt32)), {0, -1, 1, 9, -8});
  const Tensor f = pow(make({4, 9}, kInt64), make({0.5, 0.5}, kFloat32));
  EXPECT_EQ(f.dtype(), kFloat32);
  expect_values(f, {2, 3});
  // A 0-dim exponent keeps the tensor's dtype category.
  EXPECT_EQ(pow(make({1, 2}, kFloat32), scalar_tensor(2.0, {.dtype = kFloat64})).dtype(), kFloat32);
}

TEST(PowTensor, DerivativesAndStridedInputs) {
  const Tensor a = random_tensor({3, 4}, kFloat64, true, 0.5, 2);
  const Tensor b = random_tensor({4}, kFloat64, true, -2, 2);
  expect_gradcheck([](L v) { return pow(v[0], v[1]); }, {a, b});
  expect_gradgradcheck([](L v) { return pow(v[0], v[1]); }, {a, b});
  expect_gradcheck([](L v) { return pow(1.7, v[0]); }, {b});
  expect_gradgradcheck([](L v) { return pow(1.7, v[0]); }, {b});
  const Tensor af = a.detach().to(kFloat32), bf = b.detach().to(kFloat32).expand({3, 4});
  expect_close(pow(strided_copy(af), strided_copy(bf.contiguous())), pow(af, bf), 1e-6, 1e-6);
  EXPECT_EQ(pow(zeros({0, 4}), zeros({4})).sizes(), (Shape{0, 4}));
}

TEST(PowTensor, Errors) {
  EXPECT_THROW_MSG(pow(zeros({2}, {.dtype = kBool}), zeros({2}, {.dtype = kBool})),
                   "[pow] is not supported for bool base and exponent");
  EXPECT_THROW_MSG(pow(zeros({2, 3}), zeros({4})), "cannot broadcast");
}

// ---- clamp with tensor bounds ------------------------------------------------------------------

TEST(ClampTensor, ValuesAndGradientsMatchPyTorch) {
  Tensor x = leaf({-2, 0, 1, 3, 0.5, 2, -1, 5}, {2, 4});
  Tensor lo = leaf({0, 0, 2, 1});
  Tensor hi = leaf({1, 2}, {2, 1});
  const Tensor out = clamp(x, lo, hi);
  // torch.clamp(x, lo, hi); the gradient of (out * arange(1, 9).view(2, 4)).sum()
  expect_values(out, {0, 0, 1, 1, 0.5, 2, 2, 2});
  const Tensor w = arange(1, 9, 1, {.dtype = kFloat64}).reshape({2, 4});
  const TensorList g = grads_of(mul(out, w), {x, lo, hi});
  expect_values(g[0], {0, 2, 0, 0, 5, 6, 0, 0});  // ties with a bound go to x
  expect_values(g[1], {1, 0, 0, 0});              // min > max: max's value, max's gradient
  expect_values(g[2], {7, 8});
}

TEST(ClampTensor, OneBoundValuesAndGradients) {
  Tensor x = leaf({-2, 0, 1, 3, 0.5, 2, -1, 5}, {2, 4});
  Tensor lo = leaf({0, 0, 2, 1});
  Tensor out = clamp_min(x, lo);
  // torch.clamp(x, min=lo)
  expect_values(out, {0, 0, 2, 3, 0.5, 2, 2, 5});
  TensorList g = grads_of(out, {x, lo});
  expect_values(g[0], {0, 1, 0, 1, 1, 1, 0, 1});
  expect_values(g[1], {1, 0, 2, 0});
  Tensor x2 = leaf({-2, 0, 1, 3, 0.5, 2, -1, 5}, {2, 4});
  Tensor hi = leaf({1, 2}, {2, 1});
  out = clamp_max(x2, hi);
  // torch.clamp(x, max=hi)
  expect_values(out, {-2, 0, 1, 1, 0.5, 2, -1, 2});
  g = grads_of(out, {x2, hi});
  expect_values(g[0], {1, 1, 1, 0, 1, 1, 1, 0});
  expect_values(g[1], {1, 1});
}

TEST(ClampTensor, NaNIntegersAndPromotion) {
  // torch.clamp(tensor([nan, 1, 1]), tensor([0, nan, 0]), tensor([2, 2, nan])) is all NaN
  expect_values(clamp(make({kNaN, 1, 1}), make({0, kNaN, 0}), make({2, 2, kNaN})), {kNaN, kNaN, kNaN});
  const Tensor i = clamp(make({-5, 3, 9}, kInt64), make({0, 0, 0}, kInt64), make({4, 4, 4}, kInt64));
  EXPECT_EQ(i.dtype(), kInt64);
  expect_values(i, {0, 3, 4});
  EXPECT_EQ(clamp(make({1, 2}, kInt64), make({1.5, 1.5}, kFloat32), Tensor()).dtype(), kFloat32);
}

TEST(ClampTensor, DerivativesAndStridedInputs) {
  const Tensor x = random_tensor({3, 4}, kFloat64, true, -2, 2);
  const Tensor lo = random_tensor({4}, kFloat64, true, -1.5, -0.2);
  const Tensor hi = random_tensor({3, 1}, kFloat64, true, 0.2, 1.5);
  expect_gradcheck([](L v) { return clamp(v[0], v[1], v[2]); }, {x, lo, hi});
  expect_gradcheck([](L v) { return clamp_min(v[0], v[1]); }, {x, lo});
  expect_gradcheck([](L v) { return clamp_max(v[0], v[1]); }, {x, hi});
  const Tensor xs = strided_copy(x.detach());
  expect_close(clamp(xs, lo.detach(), hi.detach()), clamp(x.detach(), lo.detach(), hi.detach()));
  EXPECT_EQ(clamp(zeros({0, 4}), zeros({4}), ones({4})).sizes(), (Shape{0, 4}));
}

TEST(ClampTensor, Errors) {
  EXPECT_THROW_MSG(clamp(zeros({2}), Tensor(), Tensor()), "[clamp] at least one of 'min' or 'max' must not be None");
  EXPECT_THROW_MSG(clamp(zeros({2}, {.dtype = kBool}), zeros({2}, {.dtype = kBool}), Tensor()),
                   "[clamp] is not supported for bool tensors");
  EXPECT_THROW_MSG(clamp(zeros({2, 3}), zeros({4}), Tensor()), "cannot broadcast");
}

// ---- autocast: PyTorch's CUDA float32 list ------------------------------------------------------

TEST(AutocastFloat32List, CpuAutocastLeavesTheseOpsInBFloat16) {
  const Tensor x = random_tensor({4, 5}, kFloat32, false, 0.5, 2).to(kBFloat16);
  AutocastGuard amp(kCPU, kBFloat16);
  // PyTorch's CPU autocast lists none of them: they run in the input's dtype.
  for (const Tensor& y : {exp(x), log(x), rsqrt(x), pow(x, 2), square(x), pow(x, x), pow(2.0, x), softplus(x), sum(x),
                          sum(x, {1}), softmax(x, 1), log_softmax(x, 1)})
    EXPECT_EQ(y.dtype(), kBFloat16);
}

TEST(AutocastFloat32List, CudaAutocastRunsTheseOpsInFloat32) {
  TG_REQUIRE_CUDA();
  const Tensor x = random_tensor({4, 5}, kFloat32, false, 0.5, 2).to(kBFloat16).to(cuda_device());
  AutocastGuard amp(Device(DeviceType::CUDA), kBFloat16);
  for (const Tensor& y : {exp(x), log(x), rsqrt(x), pow(x, 2), square(x), pow(x, x), pow(2.0, x), softplus(x), sum(x),
                          sum(x, {1}), softmax(x, 1), log_softmax(x, 1)})
    EXPECT_EQ(y.dtype(), kFloat32);
  EXPECT_EQ(sum(x, {}, false, kBFloat16).dtype(), kBFloat16);  // an asked-for dtype wins
  EXPECT_EQ(silu(x).dtype(), kBFloat16);                        // not on the list
  // The example of the list's purpose: log of a low-precision product comes back in float32.
  const Tensor w = random_tensor({3, 5}, kFloat32, false, 0.5, 2).to(cuda_device());
  EXPECT_EQ(log(linear(x.to(kFloat32), w)).dtype(), kFloat32);
}

// ---- elementwise fusion ----------------------------------------------------------------------------

// The one fused node of fn traced on data-less CUDA stand-ins of `args`, with its inputs' metas.
struct FusedGroup {
  graphs::Partition part;
  const graphs::GraphNode* node = nullptr;
  const FusedElementwiseOp* op = nullptr;
  std::vector<TensorMeta> inputs;
  TensorMeta output;
};

FusedGroup fused_group(const graphs::GraphFn& fn, const TensorList& args) {
  FusedGroup g;
  g.part = graphs::partition(graphs::trace_joint(fn, args), graphs::PartitionerKind::Default);
  EXPECT_EQ(graphs::fuse_elementwise_chains(g.part.forward), 1) << g.part.forward.to_text();
  for (const graphs::GraphNode& n : g.part.forward.nodes)
    if (auto* f = dynamic_cast<const FusedElementwiseOp*>(n.op.get())) {
      g.node = &n;
      g.op = f;
      for (graphs::ValueId v : n.inputs) g.inputs.push_back(g.part.forward.values[static_cast<size_t>(v)].meta);
      g.output = g.part.forward.values[static_cast<size_t>(n.outputs[0])].meta;
    }
  return g;
}

Tensor cuda_fake(const Shape& s, DType d = kFloat32) { return graphs::fake_tensor(s, d, cuda_device(0), false); }

TensorList new_kinds(const TensorList& x) {
  const Tensor a = x[0], b = x[1];
  Tensor u = add(silu(a), softplus(b));
  u = add(u, softplus(a, 0.3, 1.5));  // a beta with no exact 16-bit value
  u = add(u, pow(add(abs(a), 0.5), b));
  u = add(u, pow(1.7, b));
  u = add(u, silu_backward(a, b));
  return {u};
}

TEST(SiluPowFusion, OneGroupWhoseCpuPathMatchesEager) {
  const FusedGroup g = fused_group(new_kinds, {cuda_fake({4, 5}), cuda_fake({5})});
  ASSERT_NE(g.op, nullptr);
  const Tensor a = random_tensor({4, 5}, kFloat32, false, -3, 3), b = random_tensor({5}, kFloat32, false, -2, 2);
  const TensorList args = {a, b};
  TensorList in;
  for (graphs::ValueId v : g.node->inputs)
    for (const graphs::GraphInput& gi : g.part.forward.inputs)
      if (gi.value == v) in.push_back(args[static_cast<size_t>(gi.index)]);
  expect_close(run_kernel(*g.op, in).at(0), new_kinds(args)[0], 1e-5, 1e-6);
  const std::string src = fused_kernel_source(g.op->program(), fused_geometry(g.output, g.inputs));
  for (const char* piece : {"ew::SiluFn<", "ew::SoftplusFn<", "ew::PowTensorFn<", "ew::SiluBackwardFn<"})
    EXPECT_NE(src.find(piece), std::string::npos) << piece;
}

#ifdef TG_WITH_CUDA
// NVRTC runs on the host: the generated sources must compile without a GPU.
TEST(SiluPowFusion, SourcesCompileWithNvrtc) {
  for (DType d : {kFloat32, kFloat64, kFloat16, kBFloat16}) {
    const FusedGroup g = fused_group(new_kinds, {cuda_fake({6, 7}, d), cuda_fake({7}, d)});
    ASSERT_NE(g.op, nullptr);
    const std::string src = fused_kernel_source(g.op->program(), fused_geometry(g.output, g.inputs));
    const cuda::CompiledImage image = cuda::nvrtc_compile(src, "compute_90");
    EXPECT_NE(image.image.find(".entry tg_fused_elementwise"), std::string::npos) << image.log << src;
  }
  auto ints = [](const TensorList& x) { return TensorList{mul(pow(x[0], x[1]), 3)}; };
  const FusedGroup g = fused_group(ints, {cuda_fake({5}, kInt64), cuda_fake({5}, kInt64)});
  ASSERT_NE(g.op, nullptr);
  const std::string src = fused_kernel_source(g.op->program(), fused_geometry(g.output, g.inputs));
  EXPECT_NE(cuda::nvrtc_compile(src, "compute_90").image.find(".entry"), std::string::npos) << src;
}
#endif

// ---- CPU against CUDA ----------------------------------------------------------------------------

TEST(SiluPowClampCuda, MatchCpuForwardAndBackward) {
  TG_REQUIRE_CUDA();
  for (DType d : {kFloat32, kFloat64}) {
    const Tensor x = random_tensor({33, 17}, d, false, -6, 6);
    const Tensor pos = random_tensor({33, 17}, d, false, 0.2, 3);
    const Tensor e = random_tensor({17}, d, false, -2, 2);
    const Tensor lo = random_tensor({17}, d, false, -3, 0), hi = random_tensor({33, 1}, d, false, 0, 3);
    expect_cuda_matches_cpu([](L v) { return silu(v[0]); }, {x});
    expect_cuda_matches_cpu([](L v) { return softplus(v[0], 1.5, 4); }, {x});
    expect_cuda_matches_cpu([](L v) { return pow(v[0], v[1]); }, {pos, e});
    expect_cuda_matches_cpu([](L v) { return pow(2.5, v[0]); }, {e});
    expect_cuda_matches_cpu([](L v) { return clamp(v[0], v[1], v[2]); }, {x, lo, hi});
    expect_cuda_matches_cpu([](L v) { return clamp_min(v[0], v[1]); }, {x, lo});
    // Gradients, through a backward pass on each device.
    auto grads = [](L v) {
      TensorList leaves;
      for (const Tensor& t : v) leaves.push_back(t.detach().requires_grad_(true));
      const Tensor y = add(add(silu(leaves[0]), softplus(leaves[0], 2, 3)),
                           add(pow(leaves[1], leaves[2]), clamp(leaves[0], leaves[3], leaves[4])));
      sum(mul(y, y)).backward();
      return cat({leaves[0].grad().flatten(), leaves[1].grad().flatten(), leaves[2].grad().flatten(),
                  leaves[3].grad().flatten(), leaves[4].grad().flatten()}, 0);
    };
    expect_cuda_matches_cpu(grads, {x, pos, e, lo, hi}, 1e-4, 1e-5);
  }
  // Integer pow and 16-bit silu/softplus.
  expect_cuda_matches_cpu([](L v) { return pow(v[0], v[1]); },
                          {make({2, -1, 1, 3, -2}, kInt64), make({-1, -3, -2, 2, 3}, kInt64)});
  const Tensor h = random_tensor({9, 40}, kFloat32, false, -8, 8).to(kBFloat16);
  expect_cuda_matches_cpu([](L v) { return silu(v[0]); }, {h}, 1e-2, 1e-2);
  expect_cuda_matches_cpu([](L v) { return softplus(v[0]); }, {h}, 1e-2, 1e-2);
}

TEST(SiluPowClampCuda, FusedKernelsMatchEager) {
  TG_REQUIRE_CUDA();
  const Tensor x = random_tensor({64, 48}, kFloat32, false, -5, 5).to(cuda_device());
  const Tensor e = random_tensor({48}, kFloat32, false, 0.5, 2).to(cuda_device());
  auto fn = [&](const Tensor& in) {
    const Tensor a = add(silu(in), softplus(mul(in, 0.5), 2, 3));
    return mul(pow(abs(a), e), 1.5);
  };
  auto compiled = compile(fn);
  expect_close(compiled(x).to(kCPU), fn(x).to(kCPU), 1e-5, 1e-6);
}

}  // namespace
}  // namespace tg
