// Programs the differential fuzzer found compiled runs getting wrong under cudagraphs, each kept as
// a test of the fix (the reproducer it printed, trimmed to the statements that matter).
#include <gtest/gtest.h>

#include "graphs/testing/parity.h"
#include "ops/linear_grad.h"
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

}  // namespace
}  // namespace tg
