// Programs the differential fuzzer found compiled runs getting wrong (under cudagraphs, or with shape
// buckets on the CPU), each kept as a test of the fix (the reproducer it printed, trimmed to the
// statements that matter).
#include <gtest/gtest.h>

#include "graphs/compile.h"
#include "graphs/testing/parity.h"
#include "ops/linalg/linear_grad.h"
#include "support/test_support.h"

namespace tg {
namespace {

// Fuzz program 3067: a float16 linear whose weight and bias are one tensor and its column, then a
// tanh GELU. With gradient epilogues its weight and bias gradients were one cuBLASLt product with
// the BGRADB epilogue, and the input's gradient differed from eager's and from run to run.
TEST(FuzzRegressions, HalfLinearWithGradientEpiloguesMatchesEager) {
  TG_REQUIRE_CUDA();
  manual_seed(3067);
  Tensor in0 = randn({2}, {.dtype = kFloat16, .device = cuda_device()});
  in0.requires_grad_(true);
  auto fn = [](const TensorList& in) {
    const Tensor v6 = in[0].unsqueeze(1).tanh();
    const Tensor v8 = softmax(v6, 1);
    return TensorList{gelu(linear(v8, v6, v6.select(1, 0)), "tanh"), v6.relu()};
  };
  testing::expect_compiled_matches_eager(
      fn, {in0},
      {.compile = {.backend = "cudagraphs", .fuse_gradient_epilogues = true}, .rtol = 0.01, .atol = 0.01, .calls = 3});
}

// Fuzz program 8624: exp(x) - exp(x) is exactly zero, and so is its gradient in eager mode. The
// generated backward kernel contracted `a * b + (-a) * b` into a multiply-add, which leaves the
// rounding error of a * b, and batch_norm over the zeros scaled it up to 1.35e-5.
TEST(FuzzRegressions, FusedKernelsRoundEachOpAsEagerDoes) {
  TG_REQUIRE_CUDA();
  manual_seed(8624);
  Tensor in0 = randn({4, 4}, {.device = cuda_device()}).transpose(-1, -2);
  in0.requires_grad_(true);
  auto fn = [](const TensorList& in) {
    const Tensor zeros = in[0].exp().sub(in[0].exp());
    return TensorList{batch_norm(zeros, Tensor(), Tensor(), Tensor(), Tensor(), true), zeros};
  };
  testing::expect_compiled_matches_eager(fn, {in0},
                                         {.compile = {.backend = "cudagraphs"}, .rtol = 1e-4, .atol = 1e-5, .calls = 3});
}

// The fused weight and bias gradient of 16-bit linears, against a float32 product and sum of the same
// values, over shapes that include the 3-row gradient whose float16 bias gradient came out 4.8 off.
TEST(FuzzRegressions, SixteenBitWeightAndBiasGradientsMatchFloat32) {
  TG_REQUIRE_CUDA();
  struct Shape3 {
    int64_t rows, out, in;
  };
  for (DType dt : {kFloat16, kBFloat16}) {
    const double tol = dt == kFloat16 ? 1e-2 : 5e-2;
    for (Shape3 s : {Shape3{3, 2, 1}, Shape3{2, 2, 1}, Shape3{5, 3, 2}, Shape3{4, 8, 1}, Shape3{64, 32, 16}}) {
      for (int call = 0; call < 3; ++call) {  // the first call tunes the algorithm, the later ones use it
        manual_seed(7 + call);
        const Tensor g = randn({s.rows, s.out}).to(dt), x = randn({s.rows, s.in}).to(dt);
        auto [dw, db] = linear_weight_bias_grad(g.to(cuda_device()), x.to(cuda_device()));
        const Tensor g32 = g.to(kFloat32), x32 = x.to(kFloat32);
        SCOPED_TRACE(std::string(dtype_name(dt)) + " rows " + std::to_string(s.rows) + ", call " + std::to_string(call));
        testing::expect_close(dw.cpu().to(kFloat32), g32.t().mm(x32), tol, tol);
        testing::expect_close(db.cpu().to(kFloat32), sum(g32, {0}), tol, tol);
      }
    }
  }
}

// Fuzz program 1067: an output that does not depend on an input requiring grad (it reads it
// detached) leaves the input's gradient undefined in eager mode. Compiled with shape buckets, the
// input reaches the graph padded (a cat), and the cat's backward node turned the undefined gradient
// the compiled backward passed it into zeros. A node that receives no gradient now passes none on.
TEST(FuzzRegressions, AnInputTheOutputsDoNotNeedKeepsNoGradient) {
  manual_seed(1067);
  const Tensor w = randn({3}, {.dtype = kFloat64}).requires_grad_(true);
  auto fn = [w](const TensorList& in) { return TensorList{in[0].detach() * w}; };
  for (bool bucketed : {false, true}) {
    CompileOptions options;
    if (bucketed) options.shape_buckets = {{.dims = {{0, 0}}, .sizes = {4}, .outputs = {{0, 0}}}};
    const Tensor x = randn({3, 3}, {.dtype = kFloat64}).requires_grad_(true);
    testing::expect_compiled_matches_eager(fn, {x}, {.compile = options, .calls = 2});
  }
  // The same through a non-leaf argument, without buckets.
  auto compiled = compile([w](const Tensor& z) { return z.detach() * w; }, {.backend = "aot_eager"});
  const Tensor x = randn({3}, {.dtype = kFloat64}).requires_grad_(true);
  compiled(x.clone()).sum().backward();
  EXPECT_FALSE(x.grad().defined());
  EXPECT_TRUE(w.grad().defined());
}

// Fuzz programs 552, 574 and 1954: a bucketed call that needs no padding kept its argument's
// strides (a transposed input; size-1 dims strided otherwise than the padded cat's) and compiled
// a variant of its own, more variants than buckets.
TEST(FuzzRegressions, BucketedCallsWithoutPaddingShareTheVariant) {
  manual_seed(552);
  auto fn = [](const Tensor& x) { return x.tanh() * 2.0; };
  auto compiled = compile(fn, {.shape_buckets = {{.dims = {{0, 0, 0.5}}, .sizes = {3, 6}, .outputs = {{0, 0}}}}});
  for (int64_t rows : {4, 3, 1, 6, 5, 2}) {
    for (const Shape& drawn : {Shape{rows, 4, 1}, Shape{rows, 1, 4}}) {
      const Tensor x = randn(drawn).transpose(-1, -2);
      testing::expect_close(compiled(x), fn(x), 1e-6, 1e-6);
    }
  }
  EXPECT_EQ(compiled.counters().compilations, 4);  // two buckets times two shapes
}

// Fuzz programs 842 and 829 (an input captured by the function, as a parameter): a captured tensor
// returned as it is (no op read it, or contiguous() returned it) was no graph value, and tracing
// raised "an op used a tensor ... that is neither an input, a captured tensor, nor produced inside
// the traced function". It is an output of its lifted input now, with its gradient.
TEST(FuzzRegressions, ACapturedTensorReturnedAsItIsIsAnOutput) {
  manual_seed(842);
  const Tensor w = randn({3}, {.dtype = kFloat64}).requires_grad_(true);
  const Tensor b = randn({2, 3}, {.dtype = kFloat64});
  auto fn = [w, b](const TensorList& in) { return TensorList{in[0] * 2.0, w, b.contiguous(), w}; };
  testing::expect_compiled_matches_eager(fn, {randn({3}, {.dtype = kFloat64}).requires_grad_(true)}, {.calls = 3});
  w.set_grad(Tensor());  // the parity runs above accumulated into it
  auto compiled = compile([w](const Tensor& x) { return TensorList{x * 2.0, w}; }, {.backend = "aot_eager"});
  const TensorList out = compiled(randn({3}, {.dtype = kFloat64}));
  EXPECT_EQ(out[1].impl()->storage(), w.impl()->storage());
  out[1].sum().backward();
  testing::expect_close(w.grad(), ones({3}, {.dtype = kFloat64}), 0, 0);
}

// Fuzz program 533 (in2 captured): a captured tensor detached inside the function. detach() makes
// a new handle that no op made, so the tracer lifted that handle, which died with the trace, and
// the first call raised "a captured tensor expired after its guard passed". Such a handle is
// guarded by its memory now: in-place updates are read, new memory recompiles.
TEST(FuzzRegressions, ACapturedTensorDetachedInsideIsGuardedByItsMemory) {
  manual_seed(533);
  Tensor w = randn({3}, {.dtype = kFloat64}).requires_grad_(true);
  auto compiled = compile([&w](const Tensor& x) { return x * w.detach() + w; }, {.backend = "aot_eager"});
  const Tensor x = randn({3}, {.dtype = kFloat64});
  for (int step = 0; step < 3; ++step) {
    NoGradGuard no_grad;
    testing::expect_close(compiled(x), x * w + w, 1e-15, 0);
    if (step == 0) w.mul_(2.0);                                // read in place
    if (step == 1) w.set_(randn({3}, {.dtype = kFloat64}));    // new memory
  }
  EXPECT_EQ(compiled.counters().compilations, 2);
}

}  // namespace
}  // namespace tg
