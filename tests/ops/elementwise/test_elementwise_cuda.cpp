// Elementwise ops on CUDA: every op, dtype and promotion against the CPU, with non-contiguous
// inputs, host scalar operands, and gradients. Skipped without a GPU.
#include <cmath>
#include <limits>
#include <vector>

#include "ops/elementwise/elementwise.h"
#include "support/test_support.h"
#include "support/values.h"

namespace tg {
namespace {

using testing::expect_close;
using testing::expect_cuda_matches_cpu;
using testing::kAll;
using testing::make;
using testing::random_tensor;
using testing::TensorFn;

using L = const TensorList&;
// ---- CUDA ------------------------------------------------------------------------------------

// Strided launches whose byte offsets pass 2^31 are cut into parts that fit 32-bit offsets: a
// transposing copy (a typed launch) and a mixed-dtype add (a converting one) over 2.15 GB of floats
// give, at sampled elements, exactly what the CPU computes from the same source elements.
TEST(ElementwiseCuda, LaunchesPastThirtyTwoBitOffsetsAreCutIntoParts) {
  TG_REQUIRE_CUDA();
  const Device dev = cuda_device(0);
  const int64_t cols = (int64_t{1} << 28) + 7;  // 2 x cols floats: 2^31 + 56 bytes
  const Tensor x = arange(0, 2 * cols, 1, {.dtype = kFloat32, .device = dev}).view({2, cols});
  const Tensor copied = x.t().contiguous();  // reads x with a stride of cols floats
  const Tensor added = x.t() + ones({1}, {.dtype = kBFloat16, .device = dev});
  ASSERT_EQ(copied.sizes(), (Shape{cols, 2}));
  for (const int64_t row : {int64_t{0}, int64_t{1}, cols / 2, cols - 2, cols - 1}) {
    SCOPED_TRACE(row);
    const Tensor source = x.narrow(1, row, 1).to(kCPU).view({2});
    expect_close(copied.narrow(0, row, 1).to(kCPU).view({2}), source, 0, 0);
    expect_close(added.narrow(0, row, 1).to(kCPU).view({2}), source + 1.0, 0, 0);
  }
}

TEST(ElementwiseCuda, EveryOpMatchesCpu) {
  TG_REQUIRE_CUDA();
  const Tensor a = random_tensor({33, 65}, kFloat32, false, -2, 2);
  const Tensor b = random_tensor({65}, kFloat32, false, -2, 2);
  const Tensor p = random_tensor({33, 65}, kFloat32, false, 0.5, 2);
  // Each op also runs on a transposed first operand (the transfer to CUDA makes inputs contiguous,
  // so the op itself must see the transposed view).
  auto on_transposed = [](TensorFn fn) { return [fn](L x) { return fn({x[0].t(), x[1]}); }; };
  auto check1 = [&](TensorFn fn, const Tensor& x) {
    expect_cuda_matches_cpu(fn, {x}, 1e-5, 1e-5);
    const Tensor xt = x.t().contiguous();
    expect_cuda_matches_cpu([fn](L y) { return fn({y[0].t()}); }, {xt}, 1e-5, 1e-5);
  };
  auto check2 = [&](TensorFn fn) {
    expect_cuda_matches_cpu(fn, {a, b}, 1e-5, 1e-5);
    expect_cuda_matches_cpu(on_transposed(fn), {a.t().contiguous(), b}, 1e-5, 1e-5);
  };
  check2([](L x) { return x[0] + x[1]; });
  check2([](L x) { return add(x[0], x[1], 0.5); });
  check2([](L x) { return x[0] - x[1]; });
  check2([](L x) { return x[0] * x[1]; });
  check2([](L x) { return x[0] / x[1]; });
  check2([](L x) { return maximum(x[0], x[1]); });
  check2([](L x) { return minimum(x[0], x[1]); });
  check2([](L x) { return x[0] + 2; });
  check2([](L x) { return 2 - x[0]; });
  check2([](L x) { return 2 / x[1]; });
  check2([](L x) { return x[0] * 0.5; });
  for (auto fn : std::vector<TensorFn>{
           [](L x) { return neg(x[0]); }, [](L x) { return abs(x[0]); }, [](L x) { return sgn(x[0]); },
           [](L x) { return exp(x[0]); }, [](L x) { return sin(x[0]); }, [](L x) { return cos(x[0]); },
           [](L x) { return tanh(x[0]); }, [](L x) { return sigmoid(x[0]); }, [](L x) { return relu(x[0]); },
           [](L x) { return gelu(x[0]); }, [](L x) { return gelu(x[0], "tanh"); }, [](L x) { return trunc(x[0]); },
           [](L x) { return pow(x[0], 2); }, [](L x) { return pow(x[0], 3); }, [](L x) { return clamp(x[0], -1, 1); },
           [](L x) { return clamp(x[0], std::nullopt, 0.25); }}) {
    check1(fn, a);
  }
  for (auto fn : std::vector<TensorFn>{[](L x) { return log(x[0]); }, [](L x) { return sqrt(x[0]); },
                                       [](L x) { return rsqrt(x[0]); }, [](L x) { return pow(x[0], 0.5); },
                                       [](L x) { return pow(x[0], 2.5); }}) {
    check1(fn, p);
  }
  for (auto fn : std::vector<TensorFn>{[](L x) { return eq(x[0], x[1]); }, [](L x) { return ne(x[0], x[1]); },
                                       [](L x) { return lt(x[0], x[1]); }, [](L x) { return le(x[0], x[1]); },
                                       [](L x) { return gt(x[0], x[1]); }, [](L x) { return ge(x[0], x[1]); },
                                       [](L x) { return gt(x[0], 0.5); },
                                       [](L x) { return where(gt(x[0], x[1]), x[0], x[1]); }}) {
    check2(fn);
  }
}

TEST(ElementwiseCuda, DtypesAndPromotionMatchCpu) {
  TG_REQUIRE_CUDA();
  for (DType da : kAll) {
    for (DType db : kAll) {
      SCOPED_TRACE(std::string(dtype_name(da)) + " with " + std::string(dtype_name(db)));
      const Tensor a = random_tensor({5, 7}, kFloat64, false, -5, 5).to(da);
      const Tensor b = random_tensor({7}, kFloat64, false, 1, 5).to(db);
      expect_cuda_matches_cpu([](L x) { return x[0] * x[1]; }, {a, b});
      expect_cuda_matches_cpu([](L x) { return x[0] / x[1]; }, {a, b});
      expect_cuda_matches_cpu([](L x) { return maximum(x[0], x[1]); }, {a, b});
      expect_cuda_matches_cpu([](L x) { return le(x[0], x[1]); }, {a, b});
      if (da != kBool || db != kBool) expect_cuda_matches_cpu([](L x) { return x[0] - x[1]; }, {a, b});
    }
  }
  const Tensor i = random_tensor({100}, kFloat64, false, -50, 50).to(kInt64);
  expect_cuda_matches_cpu([](L x) { return pow(x[0], 3); }, {i});
  expect_cuda_matches_cpu([](L x) { return exp(x[0] / 25); }, {i});
  expect_cuda_matches_cpu([](L x) { return clamp(x[0], -3, 7); }, {i});
  expect_cuda_matches_cpu([](L x) { return abs(x[0]) + relu(x[0]) - neg(x[0]); }, {i});
}

TEST(ElementwiseCuda, NonContiguousAndHostScalarOperands) {
  TG_REQUIRE_CUDA();
  const Tensor m = random_tensor({40, 30}, kFloat32, false, -2, 2);
  expect_cuda_matches_cpu([](L x) { return x[0].t() + x[0].t().contiguous(); }, {m});
  expect_cuda_matches_cpu([](L x) { return exp(x[0].slice(1, 1, 30, 3)); }, {m});
  expect_cuda_matches_cpu([](L x) { return x[0].slice(0, 0, 40, 2) * x[0].select(0, 3); }, {m});
  expect_cuda_matches_cpu([](L x) { return gt(x[0].t().slice(0, 1, 30, 2), 0); }, {m});
  expect_cuda_matches_cpu([](L x) { return x[0].slice(1, 1, 30) + 1; }, {m});  // misaligned start
  expect_cuda_matches_cpu([](L x) { return x[0].t().to(kFloat64) - x[0].to(kInt32).t(); }, {m});
  // A 0-dim CPU tensor as an operand of a CUDA op, on either side and in place.
  const Tensor s = scalar_tensor(1.5, {.dtype = kFloat64});
  Tensor g = m.cuda();
  expect_close(g * s, m * s);
  expect_close(s - g, s - m);
  expect_close(where(gt(g, 0), g, s), where(gt(m, 0), m, s));
  expect_close(tanh_backward(g, s), tanh_backward(m, s));
  Tensor h = g.clone();
  h.add_(s);
  expect_close(h, m + 1.5);
  EXPECT_THROW_MSG(g + make({1, 2}), "expected all tensors to be on the same device, but found at least two devices");
  EXPECT_THROW_MSG(make({1, 2}).add_(g.slice(0, 0, 2).select(1, 0)), "expected all tensors to be on the same device");
  // Large enough for every path: vectorized with a tail, and strided.
  const Tensor big = random_tensor({1000003}, kFloat32);
  expect_cuda_matches_cpu([](L x) { return x[0] * x[0] + 1; }, {big});
  expect_cuda_matches_cpu([](L x) { return x[0].slice(0, 1, 1000003, 7) * 2; }, {big});
}

TEST(ElementwiseCuda, GradientsMatchCpu) {
  TG_REQUIRE_CUDA();
  const Tensor a = random_tensor({6, 5}, kFloat64, false, 0.5, 2);
  const Tensor b = random_tensor({5}, kFloat64, false, 0.5, 2);
  auto grads = [](L x) {
    TensorList leaves;
    for (const Tensor& t : x) leaves.push_back(t.detach().requires_grad_(true));
    Tensor y = tanh(leaves[0]) * sigmoid(leaves[1]) + gelu(leaves[0]) / leaves[1] + relu(leaves[0] - 1) +
               maximum(leaves[0], leaves[1]) + pow(leaves[0], 2.5) + clamp(leaves[0], 0.7, 1.5);
    TensorList g = grad({y.sum()}, leaves);
    return g[0] * 2 + g[1].sum();
  };
  expect_cuda_matches_cpu(grads, {a, b}, 1e-9, 1e-9);
}

}  // namespace
}  // namespace tg
