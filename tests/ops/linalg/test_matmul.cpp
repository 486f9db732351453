// Matrix products: values against a naive reference over every shape case, operand layout
// (transposed, sliced, strided, broadcast) and dtype; errors; gradients of first and second order;
// shape inference on meta tensors; CUDA against CPU.
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "support/test_support.h"
#include "tensor/cuda_runtime.h"
#include "tensor/memory/cuda_memory.h"

namespace tg {
namespace {

using testing::expect_close;
using testing::expect_cuda_matches_cpu;
using testing::expect_gradcheck;
using testing::expect_gradgradcheck;
using testing::random_tensor;
using L = const TensorList&;

// PyTorch's matmul semantics computed element by element in float64 from the logical values.
Tensor naive_matmul(const Tensor& a, const Tensor& b) {
  const std::vector<double> av = a.to_vector<double>();
  const std::vector<double> bv = b.to_vector<double>();
  Shape sa = a.sizes(), sb = b.sizes();
  if (sa.size() == 1) sa.insert(sa.begin(), 1);
  if (sb.size() == 1) sb.push_back(1);
  const int64_t n = sa[sa.size() - 2], k = sa.back(), m = sb.back();
  Shape ba(sa.begin(), sa.end() - 2), bb(sb.begin(), sb.end() - 2);
  const size_t nd = std::max(ba.size(), bb.size());
  ba.insert(ba.begin(), nd - ba.size(), 1);
  bb.insert(bb.begin(), nd - bb.size(), 1);
  Shape batch(nd);
  for (size_t d = 0; d < nd; ++d) batch[d] = std::max(ba[d], bb[d]);
  const int64_t nb = shape_numel(batch);
  std::vector<double> out(static_cast<size_t>(nb * n * m), 0.0);
  for (int64_t t = 0; t < nb; ++t) {
    int64_t rem = t, oa = 0, ob = 0, sa_acc = 1, sb_acc = 1;
    for (size_t d = nd; d-- > 0;) {
      const int64_t i = rem % batch[d];
      rem /= batch[d];
      oa += (ba[d] == 1 ? 0 : i) * sa_acc;
      ob += (bb[d] == 1 ? 0 : i) * sb_acc;
      sa_acc *= ba[d];
      sb_acc *= bb[d];
    }
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < m; ++j) {
        double acc = 0;
        for (int64_t p = 0; p < k; ++p)
          acc += av[static_cast<size_t>((oa * n + i) * k + p)] * bv[static_cast<size_t>((ob * k + p) * m + j)];
        out[static_cast<size_t>((t * n + i) * m + j)] = acc;
      }
  }
  Shape out_shape = batch;
  if (a.dim() > 1) out_shape.push_back(n);
  if (b.dim() > 1) out_shape.push_back(m);
  return from_vector(out, out_shape);
}

// How a 2-D operand of logical shape [r, c] is laid out in memory.
enum class Layout { Contiguous, Transposed, PaddedRows, TransposedPadded, SteppedCols, BroadcastRows };
const Layout kLayouts[] = {Layout::Contiguous,       Layout::Transposed,  Layout::PaddedRows,
                           Layout::TransposedPadded, Layout::SteppedCols, Layout::BroadcastRows};

std::string layout_name(Layout l) {
  switch (l) {
    case Layout::Contiguous: return "contiguous";
    case Layout::Transposed: return "transposed";
    case Layout::PaddedRows: return "padded-rows";
    case Layout::TransposedPadded: return "transposed-padded";
    case Layout::SteppedCols: return "stepped-cols";
    case Layout::BroadcastRows: return "broadcast-rows";
  }
  return "?";
}

// A [r, c] matrix with random values in the given layout (a view into a larger or other-shaped base).
Tensor make_matrix(int64_t r, int64_t c, DType dt, Layout l) {
  switch (l) {
    case Layout::Contiguous: return random_tensor({r, c}, dt);
    case Layout::Transposed: return random_tensor({c, r}, dt).t();
    case Layout::PaddedRows: return random_tensor({r, c + 3}, dt).narrow(1, 1, c);
    case Layout::TransposedPadded: return random_tensor({c, r + 2}, dt).narrow(1, 2, r).t();
    case Layout::SteppedCols: return random_tensor({r, 2 * c}, dt).slice(1, 0, std::nullopt, 2);
    case Layout::BroadcastRows: return random_tensor({1, c}, dt).expand({r, c});
  }
  return Tensor();
}

double tol(DType dt) { return dt == kFloat32 ? 1e-4 : 1e-10; }

struct Dims {
  int64_t n, k, m;
};
const Dims kDims[] = {{1, 1, 1}, {2, 3, 4}, {7, 5, 3}, {1, 9, 1}, {16, 33, 20}, {5, 1, 6}};

// ---- values ----------------------------------------------------------------------------------

TEST(Mm, MatchesNaiveForEveryLayoutAndDtype) {
  for (DType dt : {kFloat32, kFloat64})
    for (const Dims& d : kDims)
      for (Layout la : kLayouts)
        for (Layout lb : kLayouts) {
          SCOPED_TRACE(std::string(dtype_name(dt)) + " " + std::to_string(d.n) + "x" + std::to_string(d.k) + "x" +
                       std::to_string(d.m) + " a:" + layout_name(la) + " b:" + layout_name(lb));
          Tensor a = make_matrix(d.n, d.k, dt, la);
          Tensor b = make_matrix(d.k, d.m, dt, lb);
          Tensor out = mm(a, b);
          EXPECT_EQ(out.dtype(), dt);
          EXPECT_TRUE(out.is_contiguous());
          expect_close(out, naive_matmul(a, b), tol(dt), tol(dt));
        }
}

TEST(Mm, MethodFormAndLargerSizes) {
  Tensor a = random_tensor({64, 128}, kFloat32);
  Tensor b = random_tensor({128, 256}, kFloat32);
  expect_close(a.mm(b), naive_matmul(a, b), 1e-4, 1e-4);
  expect_close(a.matmul(b), naive_matmul(a, b), 1e-4, 1e-4);
}

TEST(Mm, EmptyInnerDimensionGivesZeros) {
  Tensor out = mm(empty({3, 0}), empty({0, 4}));
  EXPECT_EQ(out.sizes(), (Shape{3, 4}));
  EXPECT_EQ(out.to_vector<float>(), std::vector<float>(12, 0.0f));
  EXPECT_EQ(mm(empty({0, 3}), empty({3, 4})).sizes(), (Shape{0, 4}));
  EXPECT_EQ(bmm(empty({2, 3, 0}), empty({2, 0, 1})).to_vector<float>(), std::vector<float>(6, 0.0f));
}

// mm's out_dtype: 16-bit operands give the float32 sum itself, for every layout; the 16-bit result
// is that sum rounded. An out_dtype equal to the operands' is plain mm.
TEST(Mm, Float32ResultOfSixteenBitOperands) {
  for (DType dt : {kBFloat16, kFloat16})
    for (Layout la : kLayouts)
      for (Layout lb : kLayouts) {
        SCOPED_TRACE(std::string(dtype_name(dt)) + " a:" + layout_name(la) + " b:" + layout_name(lb));
        const Tensor a = make_matrix(16, 33, dt, la), b = make_matrix(33, 20, dt, lb);
        const Tensor wide = mm(a, b, kFloat32);
        EXPECT_EQ(wide.dtype(), kFloat32);
        EXPECT_TRUE(wide.is_contiguous());
        expect_close(wide, naive_matmul(a, b), 1e-5, 1e-5);
        EXPECT_TRUE(equal(wide.to(dt), mm(a, b)));
      }
  const Tensor x = random_tensor({3, 4}, kFloat32), y = random_tensor({4, 2}, kFloat32);
  EXPECT_TRUE(equal(mm(x, y, kFloat32), mm(x, y)));
  EXPECT_EQ(mm(empty({3, 0}, {.dtype = kBFloat16}), empty({0, 4}, {.dtype = kBFloat16}), kFloat32).to_vector<float>(),
            std::vector<float>(12, 0.0f));
  EXPECT_THROW_MSG(mm(x, y, kFloat64),
                   "[mm] out_dtype float64 is for float16 or bfloat16 operands with a float32 result, got operands of "
                   "float32");
  EXPECT_THROW_MSG(mm(x.to(kBFloat16), y.to(kBFloat16), kFloat16), "[mm] out_dtype float16 is for float16 or bfloat16");
}

// The widened product's gradients are plain mm's for the output gradient rounded to the operands'
// dtype.
TEST(Mm, Float32ResultGradientsAreTheOperandsDtype) {
  const Tensor a = random_tensor({5, 6}, kBFloat16, true), b = random_tensor({6, 4}, kBFloat16, true);
  const Tensor g = random_tensor({5, 4}, kFloat32);
  const TensorList wide = grad({mm(a, b, kFloat32)}, {a, b}, {g});
  const TensorList plain = grad({mm(a, b)}, {a, b}, {g.to(kBFloat16)});
  ASSERT_EQ(wide.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(wide[i].dtype(), kBFloat16);
    EXPECT_TRUE(equal(wide[i], plain[i]));
  }
}

TEST(Bmm, MatchesNaiveForLayoutsAndBroadcastBatches) {
  for (DType dt : {kFloat32, kFloat64}) {
    Tensor a = random_tensor({3, 4, 5}, dt);
    Tensor b = random_tensor({3, 5, 2}, dt);
    expect_close(bmm(a, b), naive_matmul(a, b), tol(dt), tol(dt));
    expect_close(a.bmm(b), naive_matmul(a, b), tol(dt), tol(dt));
    // Inner transposes, a permuted batch dim, and a stride-0 (expanded) batch.
    Tensor at = random_tensor({3, 5, 4}, dt).transpose(1, 2);
    Tensor bp = random_tensor({5, 3, 2}, dt).permute({1, 0, 2});
    Tensor be = random_tensor({1, 5, 2}, dt).expand({3, 5, 2});
    Tensor as = random_tensor({3, 4, 10}, dt).slice(2, 0, std::nullopt, 2);
    expect_close(bmm(at, bp), naive_matmul(at, bp), tol(dt), tol(dt));
    expect_close(bmm(a, be), naive_matmul(a, be), tol(dt), tol(dt));
    expect_close(bmm(as, be), naive_matmul(as, be), tol(dt), tol(dt));
    expect_close(bmm(at, b.transpose(1, 2).contiguous().transpose(1, 2)), naive_matmul(at, b), tol(dt), tol(dt));
  }
}

TEST(Matmul, EveryShapeCaseMatchesNaive) {
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{4}, {4}},                 // dot
      {{3, 4}, {4}},              // matrix-vector
      {{4}, {4, 2}},              // vector-matrix
      {{3, 4}, {4, 2}},           // mm
      {{2, 3, 4}, {4}},           // batched matrix-vector (folded)
      {{2, 3, 4}, {4, 5}},        // batched x matrix (folded into one mm)
      {{4}, {2, 4, 3}},           // vector x batch
      {{3, 4}, {2, 4, 5}},        // matrix x batch (broadcast a)
      {{2, 3, 4}, {2, 4, 5}},     // bmm
      {{2, 1, 3, 4}, {5, 4, 2}},  // broadcast batch dims
      {{1, 3, 4}, {6, 4, 2}},     // size-1 batch broadcasts
      {{2, 2, 3, 4}, {4}},        // 4-D folded with a vector
      {{2, 2, 3, 4}, {2, 4, 1}},  // 4-D with a broadcast 3-D
  };
  for (DType dt : {kFloat32, kFloat64})
    for (const auto& [sa, sb] : cases) {
      SCOPED_TRACE(shape_str(sa) + " @ " + shape_str(sb) + " " + std::string(dtype_name(dt)));
      Tensor a = random_tensor(sa, dt);
      Tensor b = random_tensor(sb, dt);
      Tensor out = matmul(a, b);
      expect_close(out, naive_matmul(a, b), tol(dt), tol(dt));
    }
}

TEST(Matmul, NonContiguousBatchedOperands) {
  Tensor a = random_tensor({3, 2, 4}).transpose(0, 1);  // [2, 3, 4], batch not outermost in memory
  Tensor b = random_tensor({4, 5});
  expect_close(matmul(a, b), naive_matmul(a, b), 1e-10, 1e-10);
  Tensor c = random_tensor({2, 5, 4}).transpose(1, 2);  // [2, 4, 5]
  expect_close(matmul(a, c), naive_matmul(a, c), 1e-10, 1e-10);
  Tensor v = random_tensor({8}).slice(0, 0, std::nullopt, 2);  // stride 2
  expect_close(matmul(a, v), naive_matmul(a, v), 1e-10, 1e-10);
  expect_close(matmul(v, c), naive_matmul(v, c), 1e-10, 1e-10);
}

TEST(Addmm, BiasBroadcastsAndScales) {
  for (DType dt : {kFloat32, kFloat64}) {
    Tensor a = random_tensor({3, 4}, dt);
    Tensor b = random_tensor({4, 5}, dt);
    const Tensor ab = naive_matmul(a, b);
    for (const Shape& bias_shape : std::vector<Shape>{{5}, {1, 5}, {3, 1}, {3, 5}, {}}) {
      SCOPED_TRACE(shape_str(bias_shape));
      Tensor bias = random_tensor(bias_shape, dt);
      expect_close(addmm(bias, a, b), ab + bias.to(kFloat64), tol(dt), tol(dt));
      expect_close(addmm(bias, a, b, 0.5, 2), ab * 2.0 + bias.to(kFloat64) * 0.5, tol(dt), tol(dt));
      expect_close(addmm(bias, a.t().contiguous().t(), b, 1, -1), bias.to(kFloat64) - ab, tol(dt), tol(dt));
    }
    // A strided bias (every other column of a wider matrix).
    Tensor wide = random_tensor({3, 10}, dt).slice(1, 0, std::nullopt, 2);
    expect_close(addmm(wide, a, b), ab + wide.to(kFloat64), tol(dt), tol(dt));
  }
}

TEST(Addmm, ZeroBetaIgnoresNanBiasAndEmptyInnerGivesBias) {
  Tensor a = random_tensor({2, 3});
  Tensor b = random_tensor({3, 2});
  Tensor nan_bias = full({2}, std::numeric_limits<double>::quiet_NaN(), {.dtype = kFloat64});
  expect_close(addmm(nan_bias, a, b, 0, 1), naive_matmul(a, b), 1e-12, 1e-12);
  Tensor bias = random_tensor({2, 2});
  expect_close(addmm(bias, empty({2, 0}, {.dtype = kFloat64}), empty({0, 2}, {.dtype = kFloat64}), 3),
               bias * 3.0, 1e-12, 1e-12);
}

TEST(Linear, MatchesNaiveForEveryInputRank) {
  for (DType dt : {kFloat32, kFloat64}) {
    Tensor w = random_tensor({5, 4}, dt);
    Tensor bias = random_tensor({5}, dt);
    const Tensor wt = w.t();
    for (const Shape& xs : std::vector<Shape>{{4}, {3, 4}, {2, 3, 4}, {2, 1, 3, 4}}) {
      SCOPED_TRACE(shape_str(xs));
      Tensor x = random_tensor(xs, dt);
      Shape out_shape = xs;
      out_shape.back() = 5;
      Tensor y = linear(x, w, bias);
      EXPECT_EQ(y.sizes(), out_shape);
      expect_close(y, naive_matmul(x, wt) + bias.to(kFloat64), tol(dt), tol(dt));
      expect_close(linear(x, w), naive_matmul(x, wt), tol(dt), tol(dt));
    }
    // Non-contiguous input (batch dims that do not merge), a transposed weight, a one-element bias.
    Tensor x = random_tensor({3, 2, 4}, dt).transpose(0, 1);
    Tensor w_t = random_tensor({4, 5}, dt).t();
    Tensor b1 = random_tensor({1}, dt);
    expect_close(linear(x, w_t, b1), naive_matmul(x, w_t.t()) + b1.to(kFloat64), tol(dt), tol(dt));
    Tensor b_strided = random_tensor({10}, dt).slice(0, 0, std::nullopt, 2);
    expect_close(linear(x, w, b_strided), naive_matmul(x, wt) + b_strided.to(kFloat64), tol(dt), tol(dt));
  }
}

// ---- errors ----------------------------------------------------------------------------------

TEST(MatmulErrors, DtypesShapesAndRanks) {
  Tensor a = random_tensor({2, 3});
  Tensor ints = zeros({3, 4}, {.dtype = kInt64});
  EXPECT_THROW_MSG(mm(ints, ints), "[mm] expected a floating dtype for mat1, got int64");
  EXPECT_THROW_MSG(mm(a, random_tensor({4, 5})), "[mm] mat1 and mat2 shapes cannot be multiplied (2x3 and 4x5)");
  EXPECT_THROW_MSG(mm(a, random_tensor({3})), "[mm] expected mat2 to be a 2-D tensor");
  EXPECT_THROW_MSG(mm(a, random_tensor({3, 2}, kFloat32)),
                   "[mm] expected mat1 and mat2 to have the same dtype, but got float64 and float32");
  EXPECT_THROW_MSG(bmm(random_tensor({2, 2, 3}), random_tensor({3, 3, 2})),
                   "[bmm] expected size for first two dimensions of batch2 tensor to be: [2, 3] but got: [3, 3].");
  EXPECT_THROW_MSG(bmm(a, a), "[bmm] expected batch1 to be a 3-D tensor");
  EXPECT_THROW_MSG(matmul(scalar_tensor(1.0), a), "[matmul] both arguments to matmul need to be at least 1D");
  EXPECT_THROW_MSG(matmul(random_tensor({3}), random_tensor({4})), "[matmul] inconsistent tensor size");
  EXPECT_THROW_MSG(matmul(a, random_tensor({4})), "[matmul] size mismatch, got input (2), mat (2x3), vec (4)");
  EXPECT_THROW_MSG(matmul(a, random_tensor({2, 3})), "[matmul] mat1 and mat2 shapes cannot be multiplied (2x3 and 2x3)");
  EXPECT_THROW_MSG(matmul(random_tensor({2, 3, 4}), random_tensor({5, 6})),
                   "[matmul] mat1 and mat2 shapes cannot be multiplied (6x4 and 5x6)");
  EXPECT_THROW_MSG(matmul(random_tensor({2, 3, 4}), random_tensor({2, 5, 6})),
                   "[matmul] expected size for first two dimensions of batch2 tensor to be: [2, 4] but got: [2, 5].");
  EXPECT_THROW_MSG(matmul(random_tensor({2, 3, 4}), random_tensor({3, 4, 6})), "[matmul]");
  EXPECT_THROW_MSG(matmul(zeros({2, 2}, {.dtype = kInt32}), zeros({2, 2}, {.dtype = kInt32})),
                   "expected a floating dtype");
}

TEST(MatmulErrors, AddmmAndLinear) {
  Tensor a = random_tensor({2, 3});
  Tensor b = random_tensor({3, 5});
  EXPECT_THROW_MSG(addmm(random_tensor({2, 4}), a, b), "[addmm]");
  EXPECT_THROW_MSG(addmm(random_tensor({2, 2, 5}), a, b), "[addmm] bias of shape [2, 2, 5] cannot broadcast");
  EXPECT_THROW_MSG(addmm(random_tensor({5}, kFloat32), a, b), "[addmm] expected bias and mat1 to have the same dtype");
  EXPECT_THROW_MSG(addmm(random_tensor({5}), a, random_tensor({4, 5})),
                   "[addmm] mat1 and mat2 shapes cannot be multiplied (2x3 and 4x5)");
  EXPECT_THROW_MSG(linear(random_tensor({2, 3, 4}), random_tensor({5, 6})),
                   "[linear] mat1 and mat2 shapes cannot be multiplied (6x4 and 6x5)");
  EXPECT_THROW_MSG(linear(random_tensor({2, 4}), random_tensor({5, 4}), random_tensor({4})),
                   "[linear] expected bias of shape [5] (out_features), got [4]");
  EXPECT_THROW_MSG(linear(random_tensor({2, 4}), random_tensor({4})), "[linear] expected weight to be a 2-D tensor");
  EXPECT_THROW_MSG(linear(scalar_tensor(1.0), random_tensor({5, 4})), "[linear] expected input with at least 1 dim");
  EXPECT_THROW_MSG(linear(zeros({2, 4}, {.dtype = kInt64}), zeros({5, 4}, {.dtype = kInt64})),
                   "[linear] expected a floating dtype");
  EXPECT_THROW_MSG(mm(a, empty({3, 5}, {.dtype = kFloat64, .device = kMeta})), "expected all tensors to be on the same device");
  EXPECT_THROW_MSG(addmm(scalar_tensor(1.0, {.dtype = kFloat64}), empty({2, 3}, {.dtype = kFloat64, .device = kMeta}),
                         empty({3, 5}, {.dtype = kFloat64, .device = kMeta})),
                   "[addmm] expected all tensors to be on the same device");
}

// ---- gradients -------------------------------------------------------------------------------

Tensor leaf(const Shape& s) { return random_tensor(s, kFloat64, true); }

TEST(MatmulGrad, Mm) {
  auto check = [](const testing::TensorFn& fn, const TensorList& in) {
    expect_gradcheck(fn, in);
    expect_gradgradcheck(fn, in);
  };
  check([](L x) { return mm(x[0], x[1]); }, {leaf({3, 4}), leaf({4, 2})});
  // Transposed operands take the column-major gradient paths.
  check([](L x) { return mm(x[0].t(), x[1]); }, {leaf({4, 3}), leaf({4, 2})});
  check([](L x) { return mm(x[0], x[1].t()); }, {leaf({3, 4}), leaf({2, 4})});
  check([](L x) { return mm(x[0].t(), x[1].t()); }, {leaf({4, 3}), leaf({2, 4})});
  // With one operand constant the product is linear in the other: first order only.
  expect_gradcheck([](L x) { return mm(x[0], x[1]); }, {leaf({3, 4}), random_tensor({4, 2})});
  expect_gradcheck([](L x) { return mm(x[0], x[1]); }, {random_tensor({3, 4}), leaf({4, 2})});
}

TEST(MatmulGrad, Bmm) {
  const testing::TensorFn fn = [](L x) { return bmm(x[0], x[1]); };
  expect_gradcheck(fn, {leaf({2, 3, 4}), leaf({2, 4, 2})});
  expect_gradgradcheck(fn, {leaf({2, 3, 4}), leaf({2, 4, 2})});
  const testing::TensorFn bcast = [](L x) { return bmm(x[0], x[1].expand({3, 4, 2})); };
  expect_gradcheck(bcast, {leaf({3, 2, 4}), leaf({1, 4, 2})});
  expect_gradgradcheck(bcast, {leaf({3, 2, 4}), leaf({1, 4, 2})});
}

TEST(MatmulGrad, MatmulEveryCase) {
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{4}, {4}},       {{3, 4}, {4}},       {{4}, {4, 2}},          {{3, 4}, {4, 2}},       {{2, 3, 4}, {4}},
      {{2, 3, 4}, {4, 2}}, {{4}, {2, 4, 3}}, {{3, 4}, {2, 4, 2}},    {{2, 3, 4}, {2, 4, 2}}, {{2, 1, 2, 3}, {3, 3, 2}},
  };
  const testing::TensorFn fn = [](L x) { return matmul(x[0], x[1]); };
  for (const auto& [sa, sb] : cases) {
    SCOPED_TRACE(shape_str(sa) + " @ " + shape_str(sb));
    expect_gradcheck(fn, {leaf(sa), leaf(sb)});
    expect_gradgradcheck(fn, {leaf(sa), leaf(sb)});
  }
}

TEST(MatmulGrad, Addmm) {
  for (const Shape& bias_shape : std::vector<Shape>{{4}, {2, 1}, {2, 4}, {}}) {
    SCOPED_TRACE(shape_str(bias_shape));
    const testing::TensorFn fn = [](L x) { return addmm(x[0], x[1], x[2], 0.5, 2.0); };
    expect_gradcheck(fn, {leaf(bias_shape), leaf({2, 3}), leaf({3, 4})});
    expect_gradgradcheck(fn, {leaf(bias_shape), leaf({2, 3}), leaf({3, 4})});
  }
  const testing::TensorFn transposed = [](L x) { return addmm(x[0], x[1].t(), x[2].t(), 1, -1.5); };
  expect_gradcheck(transposed, {leaf({4}), leaf({3, 2}), leaf({4, 3})});
  expect_gradgradcheck(transposed, {leaf({4}), leaf({3, 2}), leaf({4, 3})});
}

TEST(MatmulGrad, Linear) {
  const testing::TensorFn with_bias = [](L x) { return linear(x[0], x[1], x[2]); };
  const testing::TensorFn no_bias = [](L x) { return linear(x[0], x[1]); };
  for (const Shape& xs : std::vector<Shape>{{4}, {3, 4}, {2, 3, 4}}) {
    SCOPED_TRACE(shape_str(xs));
    expect_gradcheck(with_bias, {leaf(xs), leaf({5, 4}), leaf({5})});
    expect_gradgradcheck(with_bias, {leaf(xs), leaf({5, 4}), leaf({5})});
    expect_gradcheck(no_bias, {leaf(xs), leaf({5, 4})});
    expect_gradgradcheck(no_bias, {leaf(xs), leaf({5, 4})});
  }
  const testing::TensorFn transposed_w = [](L x) { return linear(x[0].transpose(0, 1), x[1].t(), x[2]); };
  expect_gradcheck(transposed_w, {leaf({3, 2, 4}), leaf({4, 5}), leaf({1})});
  expect_gradgradcheck(transposed_w, {leaf({3, 2, 4}), leaf({4, 5}), leaf({1})});
}

TEST(MatmulGrad, TransposedWeightGetsAContiguousGradient) {
  Tensor w = leaf({5, 4});
  Tensor x = random_tensor({3, 4});
  mm(x, w.t()).sum().backward();
  ASSERT_TRUE(w.grad().defined());
  EXPECT_TRUE(w.grad().is_contiguous());
  Tensor w2 = leaf({5, 4});
  Tensor b2 = leaf({5});
  linear(random_tensor({2, 3, 4}), w2, b2).sum().backward();
  EXPECT_TRUE(w2.grad().is_contiguous());
  expect_close(b2.grad(), full({5}, 6.0, {.dtype = kFloat64}));
}

// ---- meta ------------------------------------------------------------------------------------

TEST(MatmulMeta, InfersShapesWithoutData) {
  const TensorOptions meta{.dtype = kFloat32, .device = kMeta};
  Tensor y = mm(empty({2, 3}, meta), empty({3, 5}, meta));
  EXPECT_EQ(y.sizes(), (Shape{2, 5}));
  EXPECT_TRUE(y.is_meta());
  EXPECT_EQ(bmm(empty({4, 2, 3}, meta), empty({4, 3, 5}, meta)).sizes(), (Shape{4, 2, 5}));
  EXPECT_EQ(matmul(empty({2, 1, 4, 3}, meta), empty({5, 3, 6}, meta)).sizes(), (Shape{2, 5, 4, 6}));
  EXPECT_EQ(matmul(empty({7, 2, 3}, meta), empty({3}, meta)).sizes(), (Shape{7, 2}));
  EXPECT_EQ(matmul(empty({3}, meta), empty({3}, meta)).sizes(), (Shape{}));
  EXPECT_EQ(addmm(empty({5}, meta), empty({2, 3}, meta), empty({3, 5}, meta)).sizes(), (Shape{2, 5}));
  Tensor l = linear(empty({7, 2, 3}, meta), empty({4, 3}, meta), empty({4}, meta));
  EXPECT_EQ(l.sizes(), (Shape{7, 2, 4}));
  EXPECT_EQ(l.dtype(), kFloat32);
  EXPECT_TRUE(l.is_meta());
  EXPECT_THROW_MSG(linear(empty({7, 2, 3}, meta), empty({4, 2}, meta)), "[linear] mat1 and mat2 shapes cannot");
}

TEST(MatmulMeta, GradientsInferOnMeta) {
  const TensorOptions meta{.dtype = kFloat32, .device = kMeta, .requires_grad = true};
  Tensor x = empty({3, 4}, meta);
  Tensor w = empty({5, 4}, meta);
  Tensor b = empty({5}, meta);
  TensorList g = grad({linear(x, w, b).sum()}, {x, w, b});
  EXPECT_EQ(g[0].sizes(), (Shape{3, 4}));
  EXPECT_EQ(g[1].sizes(), (Shape{5, 4}));
  EXPECT_EQ(g[2].sizes(), (Shape{5}));
}

// ---- CUDA ------------------------------------------------------------------------------------

TEST(MatmulCuda, MmMatchesCpuForLayoutsAndDtypes) {
  TG_REQUIRE_CUDA();
  for (DType dt : {kFloat32, kFloat64}) {
    const double rt = dt == kFloat32 ? 1e-4 : 1e-10;
    for (const Dims& d : {Dims{2, 3, 4}, Dims{65, 130, 257}, Dims{1, 64, 1}}) {
      Tensor a = random_tensor({d.n, d.k}, dt), at = random_tensor({d.k, d.n}, dt);
      Tensor b = random_tensor({d.k, d.m}, dt), bt = random_tensor({d.m, d.k}, dt);
      expect_cuda_matches_cpu([](L x) { return mm(x[0], x[1]); }, {a, b}, rt, rt);
      expect_cuda_matches_cpu([](L x) { return mm(x[0].t(), x[1]); }, {at, b}, rt, rt);
      expect_cuda_matches_cpu([](L x) { return mm(x[0], x[1].t()); }, {a, bt}, rt, rt);
      expect_cuda_matches_cpu([](L x) { return mm(x[0].t(), x[1].t()); }, {at, bt}, rt, rt);
      expect_cuda_matches_cpu([](L x) { return mm(x[0].slice(1, 0, std::nullopt, 2), x[1]); },
                              {random_tensor({d.n, 2 * d.k}, dt), b}, rt, rt);
      expect_cuda_matches_cpu([](L x) { return mm(x[0], x[1]); }, {make_matrix(d.n, d.k, dt, Layout::Contiguous),
                                                                   random_tensor({d.k, d.m}, dt)}, rt, rt);
    }
  }
}

TEST(MatmulCuda, Float32ResultOfSixteenBitOperandsMatchesCpu) {
  TG_REQUIRE_CUDA();
  for (DType dt : {kBFloat16, kFloat16})
    for (const Dims& d : {Dims{2, 3, 4}, Dims{65, 130, 257}}) {
      const Tensor a = random_tensor({d.n, d.k}, dt), b = random_tensor({d.k, d.m}, dt), bt = random_tensor({d.m, d.k}, dt);
      expect_cuda_matches_cpu([](L x) { return mm(x[0], x[1], kFloat32); }, {a, b}, 1e-5, 1e-5);
      expect_cuda_matches_cpu([](L x) { return mm(x[0], x[1].t(), kFloat32); }, {a, bt}, 1e-5, 1e-5);
    }
}

TEST(MatmulCuda, BatchedAddmmLinearMatchCpu) {
  TG_REQUIRE_CUDA();
  for (DType dt : {kFloat32, kFloat64}) {
    const double rt = dt == kFloat32 ? 1e-4 : 1e-10;
    expect_cuda_matches_cpu([](L x) { return bmm(x[0], x[1]); }, {random_tensor({3, 4, 5}, dt),
                                                                 random_tensor({3, 5, 6}, dt)}, rt, rt);
    expect_cuda_matches_cpu([](L x) { return bmm(x[0].transpose(1, 2), x[1].expand({3, 5, 6})); },
                            {random_tensor({3, 5, 4}, dt), random_tensor({1, 5, 6}, dt)}, rt, rt);
    expect_cuda_matches_cpu([](L x) { return matmul(x[0], x[1]); }, {random_tensor({2, 1, 4, 3}, dt),
                                                                    random_tensor({5, 3, 6}, dt)}, rt, rt);
    expect_cuda_matches_cpu([](L x) { return matmul(x[0], x[1]); }, {random_tensor({7}, dt),
                                                                    random_tensor({7}, dt)}, rt, rt);
    expect_cuda_matches_cpu([](L x) { return addmm(x[0], x[1], x[2], 0.5, 2); },
                            {random_tensor({3, 1}, dt), random_tensor({3, 4}, dt), random_tensor({4, 6}, dt)}, rt, rt);
    expect_cuda_matches_cpu([](L x) { return addmm(x[0], x[1], x[2]); },
                            {random_tensor({6}, dt), random_tensor({3, 0}, dt), random_tensor({0, 6}, dt)}, rt, rt);
    expect_cuda_matches_cpu([](L x) { return linear(x[0], x[1], x[2]); },
                            {random_tensor({64, 128}, dt), random_tensor({256, 128}, dt), random_tensor({256}, dt)},
                            rt, rt);
    expect_cuda_matches_cpu([](L x) { return linear(x[0].transpose(0, 1), x[1], x[2]); },
                            {random_tensor({3, 2, 4}, dt), random_tensor({5, 4}, dt), random_tensor({5}, dt)}, rt, rt);
    expect_cuda_matches_cpu([](L x) { return linear(x[0], x[1]); },
                            {random_tensor({4}, dt), random_tensor({5, 4}, dt)}, rt, rt);
    // Operands and bias at odd offsets (4- or 8-byte aligned only): the fused-bias kernels must
    // either honour the alignment or step aside for the plain path.
    expect_cuda_matches_cpu([](L x) { return linear(x[0].narrow(1, 1, 32), x[1], x[2].narrow(0, 1, 48)); },
                            {random_tensor({16, 33}, dt), random_tensor({48, 32}, dt), random_tensor({49}, dt)}, rt,
                            rt);
    expect_cuda_matches_cpu([](L x) { return addmm(x[0], x[1], x[2]); },
                            {random_tensor({96}, dt), random_tensor({33, 40}, dt), random_tensor({40, 96}, dt)}, rt, rt);
  }
}

// Products whose algorithm is timed (the default) and products on the heuristic's first choice
// agree with the CPU; the shapes are those of a small MLP's training step, where the choices differ.
TEST(MatmulCuda, TimedAndHeuristicAlgorithmsMatchCpu) {
  TG_REQUIRE_CUDA();
  for (bool timed : {true, false}) {
    set_gemm_autotuning(timed);
    const int64_t batch = timed ? 64 : 48;  // new shapes, so each setting chooses for itself
    for (DType dt : {kFloat32, kFloat64}) {
      const double rt = dt == kFloat32 ? 1e-4 : 1e-10;
      expect_cuda_matches_cpu([](L x) { return linear(x[0], x[1], x[2]); },
                              {random_tensor({batch, 64}, dt), random_tensor({128, 64}, dt), random_tensor({128}, dt)},
                              rt, rt);
      expect_cuda_matches_cpu([](L x) { return mm(x[0].t(), x[1]); },
                              {random_tensor({batch, 10}, dt), random_tensor({batch, 128}, dt)}, rt, rt);
      expect_cuda_matches_cpu([](L x) { return mm(x[0], x[1]); },
                              {random_tensor({batch, 10}, dt), random_tensor({10, 128}, dt)}, rt, rt);
    }
  }
  set_gemm_autotuning(true);
}

TEST(MatmulCuda, GradientsMatchCpu) {
  TG_REQUIRE_CUDA();
  // The gradients of a small MLP layer stack, flattened into one tensor so both runs compare at once.
  const testing::TensorFn grads = [](L x) {
    TensorList in;
    for (const Tensor& t : x) in.push_back(t.detach().requires_grad_(true));
    Tensor h = linear(in[0], in[1], in[2]).relu();
    Tensor y = matmul(h, in[3]).sum();
    TensorList g = grad({y}, {in[0], in[1], in[2], in[3]});
    Tensor flat;
    for (const Tensor& gi : g) flat = flat.defined() ? cat({flat, gi.flatten()}, 0) : gi.flatten();
    return flat;
  };
  expect_cuda_matches_cpu(grads, {random_tensor({8, 6}), random_tensor({5, 6}), random_tensor({5}),
                                  random_tensor({5, 3})}, 1e-10, 1e-10);
}

TEST(MatmulCuda, LinearAllocatesOnlyItsOutput) {
  TG_REQUIRE_CUDA();
  Tensor x = random_tensor({64, 128}, kFloat32).cuda();
  Tensor w = random_tensor({256, 128}, kFloat32).cuda();
  Tensor b = random_tensor({256}, kFloat32).cuda();
  Tensor warm = linear(x, w, b);  // creates the cuBLAS handle and workspace
  warm = Tensor();
  cuda::synchronize();
  const int64_t before = cuda::memory_allocated();
  cuda::reset_peak_memory_stats();
  Tensor y = linear(x, w, b);
  const int64_t out_bytes = 64 * 256 * 4;
  EXPECT_EQ(cuda::memory_allocated() - before, out_bytes);
  EXPECT_EQ(cuda::max_memory_allocated() - before, out_bytes) << "the weight or bias was copied";
}

}  // namespace
}  // namespace tg
