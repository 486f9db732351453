// topk: values and indices against PyTorch, NaN/inf and tie order, integer and 16-bit dtypes,
// strided inputs, k = 0 and empty rows, gradients, bad input, CPU-vs-CUDA (small, vocabulary-sized
// and many rows) and compiled-vs-eager.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "graphs/compile.h"
#include "graphs/runtime/cudagraph_step.h"
#include "ops/elementwise/compare.h"
#include "ops/factory/factory.h"
#include "ops/index/gather.h"
#include "ops/index/topk.h"
#include "support/test_support.h"

namespace tg {
namespace {

using testing::expect_close;

Tensor i64(std::vector<int64_t> v, const Shape& s) { return from_vector(v, s); }
Tensor f32(std::vector<float> v, const Shape& s) { return from_vector(v, s); }

TEST(Topk, MatchesPyTorch) {
  const Tensor x = f32({3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9}, {3, 5});
  // torch.tensor([[3.,1,4,1,5],[9,2,6,5,3],[5,8,9,7,9]]).topk(3)
  auto [v, i] = topk(x, 3);
  EXPECT_TRUE(equal(v, f32({5, 4, 3, 9, 6, 5, 9, 9, 8}, {3, 3})));
  EXPECT_TRUE(equal(i, i64({4, 2, 0, 0, 2, 3, 2, 4, 1}, {3, 3})));  // the tied 9s: lower index first
  EXPECT_EQ(i.dtype(), kInt64);
  // .topk(2, dim=0, largest=False)
  auto [v0, i0] = topk(x, 2, 0, /*largest=*/false);
  EXPECT_TRUE(equal(v0, f32({3, 1, 4, 1, 3, 5, 2, 6, 5, 5}, {2, 5})));
  EXPECT_TRUE(equal(i0, i64({0, 0, 0, 0, 1, 2, 1, 1, 1, 0}, {2, 5})));
}

TEST(Topk, NanIsLargestAndInfinitiesOrder) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const Tensor y = f32({2, nan, -1, inf, -inf, 0}, {6});
  // torch.tensor([2, nan, -1, inf, -inf, 0]).topk(4) -> values [nan, inf, 2, 0], indices [1, 3, 0, 5]
  auto [v, i] = topk(y, 4);
  EXPECT_TRUE(equal(i, i64({1, 3, 0, 5}, {4})));
  const std::vector<float> vals = v.to_vector<float>();
  EXPECT_TRUE(std::isnan(vals[0]));
  EXPECT_EQ(vals[1], inf);
  // .topk(4, largest=False) -> values [-inf, -1, 0, 2], indices [4, 2, 5, 0]
  auto [s, si] = topk(y, 4, -1, false);
  EXPECT_TRUE(equal(s, f32({-inf, -1, 0, 2}, {4})));
  EXPECT_TRUE(equal(si, i64({4, 2, 5, 0}, {4})));
  // .topk(6, largest=False) ends with the NaN.
  EXPECT_EQ(topk(y, 6, -1, false).second.to_vector<int64_t>().back(), 1);
}

TEST(Topk, SignedZerosTieInIndexOrder) {
  const Tensor z = f32({0.0f, -0.0f, 0.0f, -0.0f}, {4});
  EXPECT_TRUE(equal(topk(z, 4).second, i64({0, 1, 2, 3}, {4})));
  EXPECT_TRUE(equal(topk(z, 4, -1, false).second, i64({0, 1, 2, 3}, {4})));
}

TEST(Topk, IntegerAndSixteenBitDtypes) {
  // torch.tensor([[1,5,3],[7,-2,7]]).topk(2) -> values [[5,3],[7,7]], indices [[1,2],[0,2]]
  const Tensor z = i64({1, 5, 3, 7, -2, 7}, {2, 3});
  auto [v, i] = topk(z, 2);
  EXPECT_EQ(v.dtype(), kInt64);
  EXPECT_TRUE(equal(v, i64({5, 3, 7, 7}, {2, 2})));
  EXPECT_TRUE(equal(i, i64({1, 2, 0, 2}, {2, 2})));
  auto [v32, i32] = topk(z.to(kInt32), 2, -1, false);
  EXPECT_EQ(v32.dtype(), kInt32);
  EXPECT_TRUE(equal(v32.to(kInt64), i64({1, 3, -2, 7}, {2, 2})));
  EXPECT_TRUE(equal(i32, i64({0, 2, 1, 0}, {2, 2})));
  // Extremes of int64 order correctly (no overflow in the key).
  const Tensor big = i64({std::numeric_limits<int64_t>::min(), 0, std::numeric_limits<int64_t>::max(), -1}, {4});
  EXPECT_TRUE(equal(topk(big, 4).second, i64({2, 1, 3, 0}, {4})));
  // 16-bit floats with values they hold exactly pick what float32 picks.
  const Tensor h = f32({0.5f, -2.0f, 3.0f, 0.25f, -0.125f, 3.0f, 1.0f}, {7});
  for (DType dt : {kFloat16, kBFloat16}) {
    auto [hv, hi] = topk(h.to(dt), 5, -1, true);
    auto [fv, fi] = topk(h, 5, -1, true);
    EXPECT_EQ(hv.dtype(), dt);
    EXPECT_TRUE(equal(hi, fi)) << dtype_name(dt);
    EXPECT_TRUE(equal(hv.to(kFloat32), fv)) << dtype_name(dt);
  }
}

TEST(Topk, StridedInputsAndAnyDim) {
  const Tensor base = testing::random_tensor({4, 6, 5});
  const Tensor t = base.transpose(0, 2);  // [5, 6, 4], not contiguous
  ASSERT_FALSE(t.is_contiguous());
  for (int64_t dim : {0, 1, 2, -1}) {
    auto [v, i] = topk(t, 3, dim);
    auto [cv, ci] = topk(t.contiguous(), 3, dim);
    EXPECT_TRUE(equal(v, cv)) << dim;
    EXPECT_TRUE(equal(i, ci)) << dim;
    EXPECT_TRUE(equal(gather(t, dim, i), v)) << dim;  // indices point at the values
  }
}

TEST(Topk, AgreesWithAFullSortOnAVocabularySizedRow) {
  const int64_t n = 50257;
  const Tensor x = testing::random_tensor({2, n}, kFloat32);
  const std::vector<float> data = x.to_vector<float>();
  auto [v, i] = topk(x, 50);
  for (int64_t r = 0; r < 2; ++r) {
    std::vector<int64_t> order(static_cast<size_t>(n));
    std::iota(order.begin(), order.end(), 0);
    const float* row = data.data() + r * n;
    std::stable_sort(order.begin(), order.end(), [row](int64_t a, int64_t b) { return row[a] > row[b]; });
    order.resize(50);
    EXPECT_EQ(i.select(0, r).to_vector<int64_t>(), order) << "row " << r;
  }
}

TEST(Topk, ZeroKEmptyRowsAndScalars) {
  auto [v, i] = topk(ones({3, 4}), 0);
  EXPECT_EQ(v.sizes(), (Shape{3, 0}));
  EXPECT_EQ(i.sizes(), (Shape{3, 0}));
  auto [ev, ei] = topk(empty({2, 0}), 0);
  EXPECT_EQ(ev.sizes(), (Shape{2, 0}));
  auto [rv, ri] = topk(empty({0, 5}), 2);
  EXPECT_EQ(ri.sizes(), (Shape{0, 2}));
  // torch.tensor(3.).topk(0) and .topk(1) -> values tensor(3.), indices tensor(0)
  for (int64_t k : {0, 1}) {
    auto [sv, si] = topk(full({}, 3.0), k);
    EXPECT_EQ(sv.dim(), 0);
    EXPECT_EQ(sv.item<float>(), 3.0f);
    EXPECT_EQ(si.item<int64_t>(), 0);
  }
}

TEST(Topk, RejectsBadInput) {
  EXPECT_THROW_MSG(topk(ones({2, 3}), 4), "[topk] selected index k out of range: k = 4, but dimension 1");
  EXPECT_THROW_MSG(topk(ones({2, 3}), -1), "k = -1");
  EXPECT_THROW_MSG(topk(ones({2, 3}), 3, 0), "has size 2");
  EXPECT_THROW_MSG(topk(ones({2, 3}), 1, 2), "topk");
  EXPECT_THROW_MSG(topk(ones({2}, {.dtype = kBool}), 1), "[topk] expected a numeric tensor, got bool");
  EXPECT_THROW_MSG(topk(full({}, 1.0), 2), "k = 2");
}

TEST(Topk, GradientScattersIntoTheChosenPositions) {
  const Tensor x = testing::random_tensor({3, 5}, kFloat64, true);
  testing::expect_gradcheck([](const TensorList& in) { return topk(in[0], 2).first; }, {x});
  testing::expect_gradcheck([](const TensorList& in) { return topk(in[0], 2, 0, false).first; }, {x});
  testing::expect_gradcheck([](const TensorList& in) { return topk(in[0].transpose(0, 1), 3, 1).first; }, {x});
  // The gradient is exactly the upstream values at the chosen indices, zero elsewhere.
  Tensor leaf = f32({1, 7, 3, 5}, {4}).to(kFloat64).requires_grad_(true);
  (topk(leaf, 2).first * from_vector(std::vector<double>{10, 20}, {2})).sum().backward();
  EXPECT_TRUE(equal(leaf.grad(), from_vector(std::vector<double>{0, 10, 0, 20}, {4})));
  EXPECT_FALSE(topk(leaf, 2).second.requires_grad());
}

TEST(Topk, CompiledMatchesEager) {
  auto fn = [](const Tensor& x) {
    auto [v, i] = topk(x, 3, 1);
    return std::make_tuple(v * 2.0, i);
  };
  auto f = compile(fn, {.backend = "aot_eager"});
  const Tensor x = testing::random_tensor({4, 9}, kFloat64, true);
  auto [cv, ci] = f(x);
  auto [ev, ei] = fn(x);
  EXPECT_TRUE(equal(cv, ev));
  EXPECT_TRUE(equal(ci, ei));
  const Tensor g = grad({cv.sum()}, {x})[0];
  EXPECT_TRUE(equal(g, grad({ev.sum()}, {x})[0]));
  EXPECT_EQ(f.counters().compilations, 1);
}

// ---- CUDA ----

TEST(TopkCuda, MatchesCpuAcrossDtypesAndShapes) {
  TG_REQUIRE_CUDA();
  auto both = [](const Tensor& cpu, int64_t k, int64_t dim, bool largest) {
    auto [cv, ci] = topk(cpu, k, dim, largest);
    auto [gv, gi] = topk(cpu.cuda(), k, dim, largest);
    EXPECT_TRUE(equal(gi.cpu(), ci)) << shape_str(cpu.sizes()) << " k=" << k << " dim=" << dim;
    EXPECT_TRUE(allclose(gv.cpu(), cv, 0, 0, /*equal_nan=*/true))
        << shape_str(cpu.sizes()) << " k=" << k << " dim=" << dim;
  };
  for (DType dt : {kFloat32, kFloat64, kFloat16, kBFloat16}) {
    // Few distinct values, so that ties are common; short rows, long rows, one long row.
    const Tensor small = randint(-8, 8, {300, 17}).to(dt);
    both(small, 5, -1, true);
    both(small, 17, 1, false);
    both(small, 7, 0, true);
    both(randint(-8, 8, {200, 40}).to(dt), 7, 1, false);  // many rows past 32: the segmented sort
    const Tensor wide = randint(-50, 50, {8, 50257}).to(dt);
    both(wide, 50, -1, true);
    both(wide.narrow(0, 0, 1), 50, -1, false);
    both(wide.transpose(0, 1), 3, 1, true);  // strided rows of 8
    both(wide.transpose(0, 1), 40, 0, true);  // strided long rows
  }
  for (DType dt : {kInt32, kInt64}) {
    const Tensor ints = randint(-20, 20, {64, 1000}).to(dt);
    both(ints, 10, -1, true);
    both(ints, 10, 0, false);
  }
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const Tensor odd = f32({2, nan, -1, inf, -inf, 0, -0.0f, nan, 0}, {9});
  both(odd, 9, 0, true);
  both(odd, 9, 0, false);
  both(odd.expand({20, 9}).reshape({2, 90}), 30, 1, true);  // long rows with NaN and signed zeros
  // Many small rows and a gradient on the device.
  both(testing::random_tensor({20000, 4}, kFloat32), 2, 1, true);
  testing::expect_cuda_matches_cpu(
      [](const TensorList& in) {
        Tensor x = in[0].detach().requires_grad_(true);
        Tensor v = topk(x, 4, 0).first;
        return grad({(v * v).sum()}, {x})[0];
      },
      {testing::random_tensor({40, 6})}, 1e-12, 1e-12);
}

// Over 2^26 elements sort in batches of whole rows: here 1335 rows (segmented), then 65 (packed).
TEST(TopkCuda, LargeInputsSortInBatches) {
  TG_REQUIRE_CUDA();
  const Tensor x = randint(-1000, 1000, {1400, 50257}, {.dtype = kInt32});
  auto [cv, ci] = topk(x, 5);
  auto [gv, gi] = topk(x.cuda(), 5);
  EXPECT_TRUE(equal(gi.cpu(), ci));
  EXPECT_TRUE(equal(gv.cpu(), cv));
}

TEST(TopkCuda, EmptyInputsLaunchNothing) {
  TG_REQUIRE_CUDA();
  auto [v, i] = topk(empty({0, 100}, {.device = cuda_device()}), 5);
  EXPECT_EQ(i.sizes(), (Shape{0, 5}));
  auto [zv, zi] = topk(ones({4, 100}, {.device = cuda_device()}), 0);
  EXPECT_EQ(zi.sizes(), (Shape{4, 0}));
}

TEST(TopkCuda, CapturedInACudaGraphMatchesEager) {
  TG_REQUIRE_CUDA();
  auto fn = [](const Tensor& x) {
    auto [v, i] = topk(x, 40, -1);
    return std::make_tuple(v, i);
  };
  auto f = compile(fn, {.backend = "cudagraphs"});
  for (int step = 0; step < 4; ++step) {
    mark_step_begin();
    const Tensor x = testing::random_tensor({3, 50257}, kFloat32).cuda();
    auto [cv, ci] = f(x);
    auto [ev, ei] = fn(x);
    EXPECT_TRUE(equal(cv.cpu(), ev.cpu()));
    EXPECT_TRUE(equal(ci.cpu(), ei.cpu()));
  }
  EXPECT_GE(f.counters().replays, 2);
}

}  // namespace
}  // namespace tg
