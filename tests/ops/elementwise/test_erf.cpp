// erf: values against PyTorch's, dtype lifting, its gradient (first and second order), non-contiguous
// and empty inputs, CPU-vs-CUDA agreement, and the fused kernel calling the same functor.
#include <cmath>
#include <limits>
#include <vector>

#include "graphs/capture/fake.h"
#include "graphs/compile.h"
#include "graphs/partition/partition.h"
#include "graphs/passes/elementwise_fusion.h"
#include "ops/elementwise/fused_elementwise.h"
#include "ops/elementwise/fused_elementwise_codegen.h"
#include "support/test_support.h"
#include "support/values.h"

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
using testing::make;
using testing::random_tensor;
using testing::vals;
using L = const TensorList&;

const std::vector<double> kIn = {-3, -1.5, -0.5, 0, 0.25, 1, 2, 4};

TEST(Erf, MatchesPyTorchInFloat64AndFloat32) {
  // torch.erf(torch.tensor([-3, -1.5, -0.5, 0, 0.25, 1, 2, 4], dtype=torch.float64))
  const std::vector<double> f64 = {-0.99997790950300136, -0.96610514647531076, -0.52049987781304652,
                                   0,                    0.27632639016823696,  0.84270079294971489,
                                   0.99532226501895271,  0.99999998458274209};
  expect_values(erf(make(kIn)), f64, 1e-15);
  // The same in float32.
  const Tensor y = erf(make(kIn, kFloat32));
  EXPECT_EQ(y.dtype(), kFloat32);
  expect_values(y, {-0.999977887, -0.966105163, -0.520499885, 0, 0.276326388, 0.842700779, 0.995322287, 1}, 1e-7);
}

TEST(Erf, EdgeValuesAsPyTorch) {
  // torch.erf(torch.tensor([inf, -inf, nan, -0.0])) -> [1, -1, nan, -0.0]
  const std::vector<double> y = vals(erf(make({INFINITY, -INFINITY, NAN, -0.0})));
  EXPECT_EQ(y[0], 1.0);
  EXPECT_EQ(y[1], -1.0);
  EXPECT_TRUE(std::isnan(y[2]));
  EXPECT_EQ(y[3], 0.0);
  EXPECT_TRUE(std::signbit(y[3]));
}

TEST(Erf, IntegerAndBoolInputsComputeInFloat32) {
  // torch.erf(torch.tensor([0, 1, -2])) -> float32 [0, 0.8427, -0.9953]
  const Tensor yi = erf(make({0, 1, -2}, kInt64));
  EXPECT_EQ(yi.dtype(), kFloat32);
  expect_values(yi, {0, 0.842700779, -0.995322287}, 1e-7);
  // torch.erf(torch.tensor([True, False])) -> float32 [0.8427, 0]
  const Tensor yb = erf(make({1, 0}, kBool));
  EXPECT_EQ(yb.dtype(), kFloat32);
  expect_values(yb, {0.842700779, 0}, 1e-7);
}

TEST(Erf, SixteenBitFloatsKeepTheirDtype) {
  // torch.erf(torch.tensor([0.5, 1.5]).to(torch.bfloat16)) -> bfloat16 [0.5195, 0.9648]
  const Tensor y = erf(make({0.5, 1.5}, kBFloat16));
  EXPECT_EQ(y.dtype(), kBFloat16);
  expect_values(y, {0.51953125, 0.96484375}, 0);
}

TEST(Erf, NonContiguousAndEmptyInputs) {
  const Tensor x = random_tensor({5, 6}, kFloat64, false, -2, 2);
  const Tensor t = x.transpose(0, 1);
  ASSERT_FALSE(t.is_contiguous());
  expect_close(erf(t), erf(t.contiguous()), 0, 0);
  const Tensor empty = erf(zeros({0, 3}));
  EXPECT_EQ(empty.sizes(), (Shape{0, 3}));
}

TEST(Erf, GradientIsTwoOverSqrtPiTimesExpOfMinusXSquared) {
  Tensor x = make(kIn);
  x.requires_grad_(true);
  sum(erf(x)).backward();
  // x = torch.tensor([...], dtype=torch.float64, requires_grad=True); torch.erf(x).sum().backward(); x.grad
  expect_values(x.grad(),
                {0.00013925305194674786, 0.11893028922362936, 0.87878257893544476, 1.1283791670955126,
                 1.0600141293761143, 0.41510749742059472, 0.020666985354092053, 1.2698234671866558e-07},
                1e-15);
}

TEST(Erf, Gradcheck) {
  const Tensor x = random_tensor({3, 4}, kFloat64, true, -2.5, 2.5);
  expect_gradcheck([](L v) { return erf(v[0]); }, {x});
  expect_gradgradcheck([](L v) { return erf(v[0]); }, {x});
}

// ---- fused kernels ---------------------------------------------------------------------------------

Tensor cuda_fake(const Shape& s, DType d = kFloat32) { return graphs::fake_tensor(s, d, cuda_device(0), false); }

// The generated source of the one fused group of fn traced on CUDA stand-ins of `args`.
std::string fused_source(const graphs::GraphFn& fn, const TensorList& args) {
  graphs::Partition part = graphs::partition(graphs::trace_joint(fn, args), graphs::PartitionerKind::Default);
  EXPECT_EQ(graphs::fuse_elementwise_chains(part.forward), 1) << part.forward.to_text();
  for (const graphs::GraphNode& n : part.forward.nodes)
    if (auto* f = dynamic_cast<const FusedElementwiseOp*>(n.op.get())) {
      std::vector<TensorMeta> inputs;
      for (graphs::ValueId v : n.inputs) inputs.push_back(part.forward.values[static_cast<size_t>(v)].meta);
      const TensorMeta& out = part.forward.values[static_cast<size_t>(n.outputs[0])].meta;
      return fused_kernel_source(f->program(), fused_geometry(out, inputs));
    }
  return {};
}

TensorList erf_chain(const TensorList& x) { return {mul(erf(add(x[0], x[1])), 0.5)}; }

TEST(ErfFusion, TheKernelCallsTheEagerFunctor) {
  const std::string src = fused_source(erf_chain, {cuda_fake({4, 5}), cuda_fake({5})});
  EXPECT_NE(src.find("ew::ErfFn<float>{}("), std::string::npos) << src;
}

#ifdef TG_WITH_CUDA
// NVRTC runs on the host: the generated sources must compile without a GPU.
TEST(ErfFusion, SourcesCompileWithNvrtc) {
  for (DType d : {kFloat32, kFloat64, kFloat16, kBFloat16}) {
    const std::string src = fused_source(erf_chain, {cuda_fake({6, 7}, d), cuda_fake({7}, d)});
    const cuda::CompiledImage image = cuda::nvrtc_compile(src, "compute_90");
    EXPECT_NE(image.image.find(".entry tg_fused_elementwise"), std::string::npos) << image.log;
  }
}
#endif

// ---- CPU against CUDA ----------------------------------------------------------------------------

TEST(ErfCuda, MatchesCpuForwardAndBackward) {
  TG_REQUIRE_CUDA();
  for (DType d : {kFloat32, kFloat64}) {
    const Tensor x = random_tensor({33, 17}, d, false, -4, 4);
    expect_cuda_matches_cpu([](L v) { return erf(v[0]); }, {x});
    expect_cuda_matches_cpu([](L v) { return erf(v[0].transpose(0, 1)); }, {x});
    auto grad = [](L v) {
      const Tensor leaf = v[0].detach().requires_grad_(true);
      sum(mul(erf(leaf), erf(leaf))).backward();
      return leaf.grad();
    };
    expect_cuda_matches_cpu(grad, {x}, 1e-5, 1e-6);
  }
  expect_cuda_matches_cpu([](L v) { return erf(v[0]); }, {make({0, 1, -2, 3}, kInt32)});
  const Tensor h = random_tensor({9, 40}, kFloat32, false, -3, 3).to(kBFloat16);
  expect_cuda_matches_cpu([](L v) { return erf(v[0]); }, {h}, 1e-2, 1e-2);
}

// The fused kernel (NVRTC) and the eager kernels (nvcc) run the one ErfFn.
TEST(ErfCuda, FusedKernelMatchesEager) {
  TG_REQUIRE_CUDA();
  const Tensor a = random_tensor({64, 48}, kFloat32, false, -3, 3).to(cuda_device());
  const Tensor b = random_tensor({48}, kFloat32, false, -1, 1).to(cuda_device());
  auto fn = [](const Tensor& x, const Tensor& y) { return erf_chain({x, y})[0]; };
  auto compiled = compile(fn);
  expect_close(compiled(a, b).to(kCPU), fn(a, b).to(kCPU), 1e-6, 1e-7);
}

}  // namespace
}  // namespace tg
