// Copies: copy_ (broadcast, dtype conversion, strided source and destination, devices), clone,
// contiguous, to(), fill_ and zero_, with their gradients, errors and meta behaviour.
#include <cmath>
#include <vector>

#include "ops/elementwise/copy.h"
#include "support/test_support.h"
#include "support/values.h"

namespace tg {
namespace {

using testing::kAll;
using testing::make;
using testing::vals;
using testing::expect_close;
using testing::expect_cuda_matches_cpu;
using testing::expect_gradcheck;
using testing::random_tensor;
using L = const TensorList&;

TEST(Copy, ConvertsBetweenEveryDtypePair) {
  const std::vector<double> src_vals = {-2.75, -1, 0, 0.5, 3.25};
  for (DType from : kAll) {
    for (DType to : kAll) {
      SCOPED_TRACE(std::string(dtype_name(from)) + " -> " + std::string(dtype_name(to)));
      const Tensor src = make(src_vals, from);
      Tensor dst = zeros({5}, {.dtype = to});
      dst.copy_(src);
      // Reference: what the source holds, then C++'s conversion to the destination type.
      std::vector<double> expected;
      for (double v : vals(src)) {
        switch (to) {
          case DType::Bool: expected.push_back(v != 0 ? 1 : 0); break;
          case DType::Int32:
          case DType::Int64: expected.push_back(std::trunc(v)); break;
          case DType::Float32: expected.push_back(static_cast<float>(v)); break;
          case DType::Float64: expected.push_back(v); break;
        }
      }
      EXPECT_EQ(vals(dst), expected);
      EXPECT_EQ(vals(src.to(to)), expected);
    }
  }
  EXPECT_EQ(vals(make({-2.75, 2.75}).to(kInt64)), (std::vector<double>{-2, 2}));
  EXPECT_EQ(vals(make({0, 0.1, -3}).to(kBool)), (std::vector<double>{0, 1, 1}));
  const int64_t big = (int64_t{1} << 53) + 1;  // not representable in float64: int64 copies are exact
  Tensor i64 = from_vector(std::vector<int64_t>{big}, {1});
  Tensor dst = zeros({1}, {.dtype = kInt64});
  dst.copy_(i64);
  EXPECT_EQ(dst.item<int64_t>(), big);
  EXPECT_EQ(i64.to(kInt32).to(kInt64).item<int64_t>(), static_cast<int64_t>(static_cast<int32_t>(big)));
}

TEST(Copy, BroadcastAndStridedOperands) {
  Tensor dst = zeros({2, 3}, {.dtype = kFloat64});
  dst.copy_(make({1, 2, 3}));
  EXPECT_EQ(vals(dst), (std::vector<double>{1, 2, 3, 1, 2, 3}));
  dst.copy_(scalar_tensor(7.0, {.dtype = kFloat64}));
  EXPECT_EQ(vals(dst), std::vector<double>(6, 7.0));
  dst.copy_(make({1, 2}, kInt32, {2, 1}));
  EXPECT_EQ(vals(dst), (std::vector<double>{1, 1, 1, 2, 2, 2}));
  // Strided destination (a transposed view) and strided source (stepped slice).
  Tensor base = zeros({3, 2}, {.dtype = kFloat64});
  base.t().copy_(arange(6, {.dtype = kFloat64}).view({2, 3}));
  EXPECT_EQ(vals(base), (std::vector<double>{0, 3, 1, 4, 2, 5}));
  Tensor src = arange(12, {.dtype = kFloat64}).view({3, 4}).slice(1, 0, 4, 2);  // [3, 2], strides [4, 2]
  base.copy_(src);
  EXPECT_EQ(vals(base), (std::vector<double>{0, 2, 4, 6, 8, 10}));
  Tensor col = base.select(1, 0);
  col.copy_(make({-1, -2, -3}, kInt64));
  EXPECT_EQ(vals(base), (std::vector<double>{-1, 2, -2, 6, -3, 10}));
  Tensor empty_dst = zeros({0, 3}, {.dtype = kFloat64});
  empty_dst.copy_(make({1, 2, 3}));
  EXPECT_EQ(empty_dst.numel(), 0);
}

TEST(Copy, InPlaceSemanticsAndErrors) {
  Tensor dst = zeros({3}, {.dtype = kFloat32});
  const uint64_t v0 = dst.version();
  Tensor& r = dst.copy_(make({1, 2, 3}));
  EXPECT_TRUE(r.is_same(dst));
  EXPECT_EQ(dst.version(), v0 + 1);
  EXPECT_EQ(dst.dtype(), kFloat32);
  EXPECT_THROW_MSG(dst.copy_(make({1, 2})), "[copy_] source of shape [2] cannot be broadcast to the destination "
                   "shape [3]");
  EXPECT_THROW_MSG(dst.copy_(make({1, 2, 3, 4, 5, 6}, kFloat64, {2, 3})),
                   "cannot be broadcast to the destination shape [3]");
  Tensor m = arange(9, {.dtype = kFloat64}).view({3, 3});
  EXPECT_THROW_MSG(m.copy_(m.t()), "some elements of the input tensor and the written-to tensor refer to a single "
                   "memory location");
  Tensor e = make({1}).expand({3});
  EXPECT_THROW_MSG(e.copy_(make({1, 2, 3})), "more than one element of the written-to tensor refers to a single "
                   "memory location");
  const Tensor meta = empty({3}, {.dtype = kFloat64, .device = kMeta});
  EXPECT_THROW_MSG(dst.copy_(meta), "[copy_] cannot copy out of a meta tensor");
  Tensor meta_dst = empty({2, 3}, {.device = kMeta});
  EXPECT_TRUE(meta_dst.copy_(make({1, 2, 3})).is_meta());
  m.copy_(m);  // the same elements: a no-op
  EXPECT_EQ(vals(m)[4], 4.0);
}

TEST(Copy, CloneAndContiguous) {
  const Tensor x = arange(6, {.dtype = kFloat64}).view({2, 3});
  Tensor c = x.clone();
  EXPECT_FALSE(c.is_same(x));
  EXPECT_TRUE(c.impl()->storage() != x.impl()->storage());
  EXPECT_EQ(vals(c), vals(x));
  c.add_(1);
  EXPECT_EQ(vals(x)[0], 0.0);  // independent storage
  EXPECT_TRUE(x.contiguous().is_same(x));
  const Tensor tr = x.t();
  Tensor tc = tr.contiguous();
  EXPECT_TRUE(tc.is_contiguous());
  EXPECT_EQ(tc.sizes(), (Shape{3, 2}));
  EXPECT_EQ(tc.strides(), (Shape{2, 1}));
  EXPECT_EQ(vals(tc), (std::vector<double>{0, 3, 1, 4, 2, 5}));
  Tensor tcl = tr.clone();
  EXPECT_TRUE(tcl.is_contiguous());
  EXPECT_EQ(vals(tcl), vals(tc));
  const Tensor ints = make({1, 2, 3, 4}, kInt32).slice(0, 0, 4, 3);
  EXPECT_EQ(ints.contiguous().dtype(), kInt32);
  EXPECT_EQ(vals(ints.contiguous()), (std::vector<double>{1, 4}));
  const Tensor meta = empty({2, 3}, {.dtype = kInt64, .device = kMeta}).t();
  Tensor mc = meta.contiguous();
  EXPECT_TRUE(mc.is_meta());
  EXPECT_EQ(mc.sizes(), (Shape{3, 2}));
  EXPECT_EQ(mc.strides(), (Shape{2, 1}));
  EXPECT_EQ(mc.dtype(), kInt64);
}

TEST(Copy, ToReturnsSelfWhenNothingChanges) {
  const Tensor x = make({1.5, -2.5});
  EXPECT_TRUE(x.to(kFloat64).is_same(x));
  EXPECT_TRUE(x.to(kCPU).is_same(x));
  EXPECT_TRUE(x.to(kCPU, kFloat64).is_same(x));
  Tensor f = x.to(kFloat32);
  EXPECT_EQ(f.dtype(), kFloat32);
  EXPECT_EQ(vals(f), (std::vector<double>{1.5, -2.5}));
  EXPECT_EQ(vals(x.to(kInt32)), (std::vector<double>{1, -2}));
  Tensor m = x.to(kMeta);
  EXPECT_TRUE(m.is_meta());
  EXPECT_EQ(m.sizes(), (Shape{2}));
  EXPECT_EQ(m.dtype(), kFloat64);
  EXPECT_EQ(x.to(kMeta, kInt64).dtype(), kInt64);
  EXPECT_THROW_MSG(m.to(kCPU), "[to] cannot copy out of a meta tensor to cpu");
  EXPECT_TRUE(m.to(kMeta).is_same(m));
}

TEST(Copy, FillAndZero) {
  for (DType d : kAll) {
    SCOPED_TRACE(dtype_name(d));
    Tensor t = empty({2, 3}, {.dtype = d});
    const uint64_t v0 = t.version();
    EXPECT_TRUE(t.fill_(1).is_same(t));
    EXPECT_EQ(t.version(), v0 + 1);
    EXPECT_EQ(vals(t), std::vector<double>(6, 1.0));
    t.zero_();
    EXPECT_EQ(vals(t), std::vector<double>(6, 0.0));
  }
  Tensor i = zeros({3}, {.dtype = kInt64});
  i.fill_(2.9);
  EXPECT_EQ(vals(i), std::vector<double>(3, 2.0));
  Tensor b = zeros({2}, {.dtype = kBool});
  b.fill_(0.5);
  EXPECT_EQ(vals(b), std::vector<double>(2, 1.0));
  Tensor base = zeros({3, 4}, {.dtype = kFloat32});
  base.t().slice(0, 1, 4, 2).fill_(5);  // columns 1 and 3 through a transposed, stepped view
  EXPECT_EQ(vals(base), (std::vector<double>{0, 5, 0, 5, 0, 5, 0, 5, 0, 5, 0, 5}));
  Tensor meta = empty({4}, {.device = kMeta});
  EXPECT_TRUE(meta.fill_(3).is_meta());
  Tensor e = zeros({1}).expand({4});
  EXPECT_THROW_MSG(e.zero_(), "more than one element of the written-to tensor refers to a single memory location");
}

TEST(CopyGrad, ThroughEveryCopyOp) {
  auto rnd = [](const Shape& s) { return random_tensor(s, kFloat64, true); };
  expect_gradcheck([](L x) { return x[0].clone() * x[0]; }, {rnd({2, 3})});
  expect_gradcheck([](L x) { return x[0].t().contiguous() * 2; }, {rnd({2, 3})});
  expect_gradcheck([](L x) { return x[0].to(kFloat32).to(kFloat64); }, {rnd({4})}, 1e-3, 1e-3);
  // copy_ into a non-leaf: the gradient goes to the source (summed over broadcast dims), none to
  // the overwritten destination.
  expect_gradcheck([](L x) { Tensor y = x[0] * 2.0; y.copy_(x[1]); return y * x[0]; }, {rnd({2, 3}), rnd({3})});
  expect_gradcheck([](L x) { Tensor y = x[0] * 1.0; y.select(0, 1).copy_(x[1]); return y; }, {rnd({2, 3}), rnd({3})});
  expect_gradcheck([](L x) { Tensor y = x[0] * 1.0; y.slice(1, 0, 3, 2).fill_(0.5); return y * y; }, {rnd({2, 3})});
  expect_gradcheck([](L x) { Tensor y = x[0] * 1.0; y.zero_(); return y + x[0]; }, {rnd({4})});
}

TEST(CopyGrad, DtypeOfGradients) {
  Tensor x = random_tensor({3}, kFloat32, true);
  Tensor y = x.to(kFloat64);
  EXPECT_TRUE(y.requires_grad());
  (y * 2).sum().backward();
  EXPECT_EQ(x.grad().dtype(), kFloat32);
  EXPECT_EQ(vals(x.grad()), std::vector<double>(3, 2.0));
  EXPECT_FALSE(x.to(kInt64).requires_grad());  // integer results are cut from the graph
  Tensor src = random_tensor({3}, kFloat64, true);
  Tensor dst = zeros({3}, {.dtype = kFloat32});
  dst.copy_(src);
  EXPECT_TRUE(dst.requires_grad());
  (dst * 3).sum().backward();
  EXPECT_EQ(src.grad().dtype(), kFloat64);
  EXPECT_EQ(vals(src.grad()), std::vector<double>(3, 3.0));
}

// ---- CUDA ------------------------------------------------------------------------------------

TEST(CopyCuda, RoundTripsAndDeviceCopies) {
  TG_REQUIRE_CUDA();
  const Tensor x = random_tensor({37, 19}, kFloat64);
  Tensor g = x.cuda();
  EXPECT_TRUE(g.is_cuda());
  EXPECT_TRUE(g.cuda().is_same(g));
  EXPECT_TRUE(g.to(cuda_device(0)).is_same(g));
  expect_close(g.cpu(), x, 0, 0);
  // Conversions and strides on either side of the transfer.
  expect_close(x.t().cuda(), x.t(), 0, 0);
  expect_close(g.t().cpu(), x.t(), 0, 0);
  expect_close(x.to(cuda_device(0), kFloat32), x.to(kFloat32), 0, 0);
  expect_close(g.to(kCPU, kInt32), x.to(kInt32), 0, 0);
  Tensor host_dst = zeros({19, 37}, {.dtype = kFloat32});
  host_dst.copy_(g.t());
  expect_close(host_dst, x.t().to(kFloat32), 0, 0);
  Tensor dev_dst = zeros({19, 37}, {.dtype = kFloat32, .device = cuda_device(0)});
  dev_dst.t().copy_(x);
  expect_close(dev_dst, x.t().to(kFloat32), 0, 0);
  Tensor dev_row = zeros({4, 19}, {.dtype = kFloat64, .device = cuda_device(0)});
  dev_row.copy_(x.select(0, 5));  // broadcast from the host
  expect_close(dev_row, x.select(0, 5).expand({4, 19}), 0, 0);
  dev_row.copy_(scalar_tensor(2.5, {.dtype = kFloat64}));
  expect_close(dev_row, full({4, 19}, 2.5, {.dtype = kFloat64}), 0, 0);
}

TEST(CopyCuda, KernelsMatchCpu) {
  TG_REQUIRE_CUDA();
  const Tensor x = random_tensor({31, 17}, kFloat64, false, -3, 3);
  for (DType to : kAll) {
    SCOPED_TRACE(dtype_name(to));
    expect_cuda_matches_cpu([to](L t) { return t[0].to(to); }, {x});
    expect_cuda_matches_cpu([to](L t) { return t[0].t().to(to); }, {x});
    expect_cuda_matches_cpu([to](L t) { return t[0].to(to).slice(1, 1, 17, 3).contiguous(); }, {x});
    expect_cuda_matches_cpu([to](L t) {
      Tensor d = zeros({17, 31}, {.dtype = to, .device = t[0].device()});
      d.t().copy_(t[0]);
      return d;
    }, {x});
    expect_cuda_matches_cpu([to](L t) {
      Tensor d = zeros({5, 31, 17}, {.dtype = to, .device = t[0].device()});
      d.fill_(3).select(0, 2).copy_(t[0]);
      return d;
    }, {x});
  }
  expect_cuda_matches_cpu([](L t) { return t[0].clone(); }, {x});
  expect_cuda_matches_cpu([](L t) { return t[0].t().clone(); }, {x});
  expect_cuda_matches_cpu([](L t) { Tensor c = t[0].clone(); c.zero_(); return c; }, {x});
}

// The results of cast_all side by side, flattened: one tensor for the checks that take one.
Tensor cast_all_flat(const TensorList& xs, DType dtype) {
  TensorList flat;
  for (const Tensor& y : cast_all(xs, dtype)) flat.push_back(y.flatten());
  return cat(flat);
}

// cast_all: each tensor as to(dtype) gives it, in one op; its gradient casts back.
TEST(CastAll, EqualsEachCastAndGradchecks) {
  const TensorList xs{random_tensor({3, 4}, kFloat32), random_tensor({5}, kFloat64),
                      random_tensor({2, 3}, kFloat32).t(), zeros({0, 2})};
  const TensorList ys = cast_all(xs, kBFloat16);
  ASSERT_EQ(ys.size(), xs.size());
  for (size_t i = 0; i < xs.size(); ++i) {
    EXPECT_EQ(ys[i].dtype(), kBFloat16);
    EXPECT_TRUE(ys[i].is_contiguous());
    EXPECT_TRUE(equal(ys[i], xs[i].to(kBFloat16)));
  }
  EXPECT_TRUE(cast_all({}, kFloat32).empty());
  // Finite differences in float64 (a cast to float32 would round the perturbation away).
  expect_gradcheck([](L v) { return cast_all_flat(v, kFloat64); },
                   {random_tensor({3, 2}, kFloat64, true), random_tensor({4}, kFloat64, true)});
  // The gradient of a cast comes back in the input's dtype.
  Tensor a = random_tensor({3}, kFloat32, true), b = random_tensor({2, 2}, kFloat32, true);
  const TensorList c = cast_all({a, b}, kBFloat16);
  (c[0].to(kFloat32).sum() * 2.0 + c[1].to(kFloat32).sum() * 3.0).backward();
  EXPECT_EQ(a.grad().dtype(), kFloat32);
  EXPECT_TRUE(equal(a.grad(), full({3}, 2.0f)));
  EXPECT_TRUE(equal(b.grad(), full({2, 2}, 3.0f)));
}

TEST(CastAllCuda, MatchesCpuForKernelAndFallbackPairs) {
  TG_REQUIRE_CUDA();
  // float32 <-> 16-bit pairs of contiguous, aligned, multiple-of-4 tensors take the one kernel (many
  // chunks for the large one); the others (an odd length, an offset view, float64) the copies.
  const Tensor big = random_tensor({300000}, kFloat32);
  const Tensor odd = random_tensor({7, 3}, kFloat32);
  const Tensor offset = random_tensor({33}, kFloat32).narrow(0, 1, 32);
  const Tensor wide = random_tensor({4, 4}, kFloat64);
  for (DType to : {kBFloat16, kFloat16}) {
    SCOPED_TRACE(dtype_name(to));
    expect_cuda_matches_cpu([to](L v) { return cast_all_flat(v, to); }, {big, odd, offset, wide}, 0, 0);
    const TensorList half{big.to(to), odd.to(to), offset.to(to)};
    expect_cuda_matches_cpu([](L v) { return cast_all_flat(v, kFloat32); }, half, 0, 0);
  }
}

}  // namespace
}  // namespace tg
