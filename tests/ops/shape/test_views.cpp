// Views: geometry of every view op, aliasing with the base, errors, gradients (first and second
// order), in-place writes through views (CopySlices), and resize_/set_.
#include <vector>

#include "support/test_support.h"

namespace tg {
namespace {

using testing::expect_close;
using testing::expect_cuda_matches_cpu;
using testing::expect_gradcheck;
using testing::expect_gradgradcheck;
using testing::random_tensor;

// 0, 1, ..., n-1 as float64 with the given sizes, in storage of its own (not a view).
Tensor iota(const Shape& sizes) { return arange(shape_numel(sizes), {.dtype = kFloat64}).view(sizes).clone(); }

std::vector<double> values(const Tensor& t) { return t.to_vector<double>(); }

void expect_geometry(const Tensor& t, const Shape& sizes, const Shape& strides, int64_t offset) {
  EXPECT_EQ(t.sizes(), sizes);
  EXPECT_EQ(t.strides(), strides);
  EXPECT_EQ(t.storage_offset(), offset);
}

// ---- geometry --------------------------------------------------------------------------------

TEST(ViewGeometry, ViewInfersMinusOneAndKeepsStorage) {
  Tensor x = iota({2, 3, 4});
  Tensor v = x.view({4, -1});
  expect_geometry(v, {4, 6}, {6, 1}, 0);
  EXPECT_TRUE(v.impl()->storage() == x.impl()->storage());
  expect_geometry(x.view({-1}), {24}, {1}, 0);
  expect_geometry(iota({}).view({1, 1}), {1, 1}, {1, 1}, 0);
  expect_geometry(x.view({2, 1, 12}), {2, 1, 12}, {12, 12, 1}, 0);
}

TEST(ViewGeometry, InternalOverlapInAnyDimOrder) {
  EXPECT_FALSE(has_internal_overlap({}, {}));
  EXPECT_FALSE(has_internal_overlap({2, 3, 4}, {12, 4, 1}));      // row-major
  EXPECT_FALSE(has_internal_overlap({2, 1, 4}, {4, 99, 1}));      // a unit dim's stride is never used
  EXPECT_FALSE(has_internal_overlap({4, 3}, {1, 4}));             // transposed
  EXPECT_FALSE(has_internal_overlap({3, 2, 4}, {4, 12, 1}));      // permuted
  EXPECT_FALSE(has_internal_overlap({2, 2}, {10, 3}));            // gaps between rows
  EXPECT_TRUE(has_internal_overlap({3, 4}, {0, 1}));              // expanded
  EXPECT_TRUE(has_internal_overlap({2, 3}, {2, 1}));              // rows overlap by one element
  EXPECT_TRUE(has_internal_overlap({3, 2}, {1, 2}));              // the same, transposed
  EXPECT_FALSE(has_internal_overlap({2, 2, 2}, {4, 1, 2}));       // permuted, interleaved
  EXPECT_TRUE(has_internal_overlap({2, 2, 2}, {4, 1, 1}));        // two dims on one stride
  EXPECT_TRUE(has_internal_overlap({2, 2}, {1, 1}));
}

TEST(ViewGeometry, ViewOfNonContiguousWhereStridesAllow) {
  Tensor x = iota({4, 6}).slice(1, 0, 4);  // sizes [4, 4], strides [6, 1]
  Tensor v = x.view({2, 2, 4});
  expect_geometry(v, {2, 2, 4}, {12, 6, 1}, 0);
  EXPECT_EQ(values(v), values(x));
  Tensor tt = iota({3, 4}).t();  // [4, 3] strides [1, 4]
  expect_geometry(tt.unsqueeze(1).view({4, 3}), {4, 3}, {1, 4}, 0);
}

TEST(ViewGeometry, ViewErrors) {
  Tensor x = iota({2, 3});
  EXPECT_THROW_MSG(x.view({-1, -1}), "only one dimension can be inferred");
  EXPECT_THROW_MSG(x.view({4, 2}), "shape '[4, 2]' is invalid for input of size 6");
  EXPECT_THROW_MSG(x.view({-1, 4}), "is invalid for input of size 6");
  EXPECT_THROW_MSG(x.view({-2, 3}), "invalid shape dimension -2");
  EXPECT_THROW_MSG(x.t().view({6}), "view size is not compatible with input tensor's size and stride");
  EXPECT_THROW_MSG(x.t().view({6}), "Use .reshape(...) instead.");
}

TEST(ViewGeometry, ReshapeViewsWhenPossibleElseCopies) {
  Tensor x = iota({2, 3});
  Tensor r = x.reshape({3, 2});
  EXPECT_TRUE(r.impl()->storage() == x.impl()->storage());
  Tensor c = x.t().reshape({6});
  EXPECT_FALSE(c.impl()->storage() == x.impl()->storage());
  EXPECT_EQ(values(c), (std::vector<double>{0, 3, 1, 4, 2, 5}));
  EXPECT_EQ(x.reshape({-1, 2}).sizes(), (Shape{3, 2}));
}

TEST(ViewGeometry, Flatten) {
  Tensor x = iota({2, 3, 4});
  EXPECT_EQ(x.flatten().sizes(), (Shape{24}));
  EXPECT_EQ(x.flatten(1).sizes(), (Shape{2, 12}));
  EXPECT_EQ(x.flatten(0, 1).sizes(), (Shape{6, 4}));
  EXPECT_EQ(x.flatten(-2, -1).sizes(), (Shape{2, 12}));
  EXPECT_TRUE(x.flatten(1, 1).is_same(x));
  EXPECT_EQ(iota({}).flatten().sizes(), (Shape{1}));
  EXPECT_THROW_MSG(x.flatten(2, 1), "cannot come after end_dim");
}

TEST(ViewGeometry, SliceClampsAndSteps) {
  Tensor x = iota({4, 10});
  expect_geometry(x.slice(1, 2, 8, 3), {4, 2}, {10, 3}, 2);
  EXPECT_EQ(values(x.slice(1, 2, 8, 3).select(0, 1)), (std::vector<double>{12, 15}));
  expect_geometry(x.slice(1, -3, {}), {4, 3}, {10, 1}, 7);
  expect_geometry(x.slice(0, 1, 100), {3, 10}, {10, 1}, 10);
  expect_geometry(x.slice(0, -100, 2), {2, 10}, {10, 1}, 0);
  expect_geometry(x.slice(1, 8, 3), {4, 0}, {10, 1}, 8);
  expect_geometry(x.slice(1, 20, 30), {4, 0}, {10, 1}, 10);
  expect_geometry(x.slice(-1, {}, {}, 4), {4, 3}, {10, 4}, 0);
  EXPECT_THROW_MSG(x.slice(1, 0, 4, 0), "slice step must be positive");
  EXPECT_THROW_MSG(x.slice(1, 0, 4, -1), "slice step must be positive");
  EXPECT_THROW_MSG(x.slice(2, 0, 1), "dimension out of range");
  EXPECT_THROW_MSG(iota({}).slice(0, 0, 1), "cannot be applied to a 0-dim tensor");
}

TEST(ViewGeometry, Narrow) {
  Tensor x = iota({4, 5});
  expect_geometry(x.narrow(1, 1, 3), {4, 3}, {5, 1}, 1);
  expect_geometry(x.narrow(0, -2, 2), {2, 5}, {5, 1}, 10);
  expect_geometry(x.narrow(1, 5, 0), {4, 0}, {5, 1}, 5);
  EXPECT_THROW_MSG(x.narrow(1, 3, 3), "start (3) + length (3) exceeds dimension size (5).");
  EXPECT_THROW_MSG(x.narrow(1, 0, -1), "length must be non-negative");
  EXPECT_THROW_MSG(x.narrow(1, 6, 0), "start out of range");
}

TEST(ViewGeometry, Select) {
  Tensor x = iota({3, 4});
  expect_geometry(x.select(0, 1), {4}, {1}, 4);
  expect_geometry(x.select(1, -1), {3}, {4}, 3);
  expect_geometry(x[2], {4}, {1}, 8);
  expect_geometry(x[2][3], {}, {}, 11);
  EXPECT_EQ(x[2][3].item<double>(), 11.0);
  EXPECT_THROW_MSG(x.select(0, 3), "index 3 out of range for tensor of size [3, 4] at dimension 0");
  EXPECT_THROW_MSG(x.select(1, -5), "index -5 out of range");
  EXPECT_THROW_MSG(iota({}).select(0, 0), "cannot be applied to a 0-dim tensor");
}

TEST(ViewGeometry, SqueezeUnsqueeze) {
  Tensor x = iota({1, 3, 1, 2});
  expect_geometry(x.squeeze(), {3, 2}, {2, 1}, 0);
  expect_geometry(x.squeeze(2), {1, 3, 2}, {6, 2, 1}, 0);
  expect_geometry(x.squeeze(1), {1, 3, 1, 2}, {6, 2, 2, 1}, 0);
  expect_geometry(x.squeeze(-4), {3, 1, 2}, {2, 2, 1}, 0);
  expect_geometry(iota({}).squeeze(0), {}, {}, 0);
  Tensor y = iota({3, 4});
  expect_geometry(y.unsqueeze(0), {1, 3, 4}, {12, 4, 1}, 0);
  expect_geometry(y.unsqueeze(1), {3, 1, 4}, {4, 4, 1}, 0);
  expect_geometry(y.unsqueeze(-1), {3, 4, 1}, {4, 1, 1}, 0);
  expect_geometry(iota({}).unsqueeze(0), {1}, {1}, 0);
  EXPECT_THROW_MSG(y.unsqueeze(3), "dimension out of range");
  EXPECT_THROW_MSG(x.squeeze(4), "dimension out of range");
}

TEST(ViewGeometry, Expand) {
  Tensor x = iota({3, 1});
  expect_geometry(x.expand({3, 4}), {3, 4}, {1, 0}, 0);
  expect_geometry(x.expand({2, -1, 4}), {2, 3, 4}, {0, 1, 0}, 0);
  expect_geometry(iota({}).expand({2, 2}), {2, 2}, {0, 0}, 0);
  EXPECT_EQ(values(x.expand({3, 2})), (std::vector<double>{0, 0, 1, 1, 2, 2}));
  EXPECT_THROW_MSG(x.expand({4, 4}), "must match the existing size (3) at non-singleton dimension 0");
  EXPECT_THROW_MSG(x.expand({4}), "the number of sizes provided (1) must be greater or equal");
  EXPECT_THROW_MSG(x.expand({-1, 3, 4}), "isn't allowed in a leading, non-existing dimension 0");
  EXPECT_EQ(x.expand_as(iota({5, 3, 2})).sizes(), (Shape{5, 3, 2}));
}

TEST(ViewGeometry, PermuteTransposeT) {
  Tensor x = iota({2, 3, 4});
  expect_geometry(x.permute({2, 0, 1}), {4, 2, 3}, {1, 12, 4}, 0);
  expect_geometry(x.permute({-1, 1, 0}), {4, 3, 2}, {1, 4, 12}, 0);
  EXPECT_THROW_MSG(x.permute({0, 1}), "input.dim() = 3 is not equal to len(dims) = 2");
  EXPECT_THROW_MSG(x.permute({0, 1, 1}), "duplicate dims are not allowed");
  EXPECT_THROW_MSG(x.permute({0, 1, 3}), "dimension out of range");
  expect_geometry(x.transpose(0, 2), {4, 3, 2}, {1, 4, 12}, 0);
  expect_geometry(x.transpose(-1, 1), {2, 4, 3}, {12, 1, 4}, 0);
  expect_geometry(iota({2, 3}).t(), {3, 2}, {1, 3}, 0);
  expect_geometry(iota({5}).t(), {5}, {1}, 0);
  expect_geometry(iota({}).t(), {}, {}, 0);
  EXPECT_THROW_MSG(x.t(), "t() expects a tensor with <= 2 dimensions, but self is 3D");
}

TEST(ViewGeometry, AsStridedUsesAbsoluteOffset) {
  Tensor base = iota({10});
  Tensor v = base.slice(0, 2, {});
  Tensor w = v.as_strided({2, 2}, {3, 1}, 1);  // absolute offset: element 1 of the base
  expect_geometry(w, {2, 2}, {3, 1}, 1);
  EXPECT_EQ(values(w), (std::vector<double>{1, 2, 4, 5}));
  EXPECT_EQ(v.as_strided({2}, {2}).storage_offset(), 2);  // default: the input's own offset
  EXPECT_EQ(values(v.as_strided({2}, {2})), (std::vector<double>{2, 4}));
  EXPECT_EQ(values(base.as_strided({3, 2}, {1, 1})), (std::vector<double>{0, 1, 1, 2, 2, 3}));
  EXPECT_THROW_MSG(base.as_strided({4, 4}, {4, 1}), "out of bounds for storage of size 80");
  EXPECT_THROW_MSG(base.as_strided({2}, {1, 1}), "mismatch in length of strides and shape");
  EXPECT_THROW_MSG(base.as_strided({2}, {-1}), "Negative strides are not supported");
}

TEST(ViewGeometry, ViewOfViewChainsAndContiguous) {
  Tensor x = iota({4, 5, 6});
  Tensor v = x.transpose(0, 2).slice(0, 1, 5, 2).select(1, 3).unsqueeze(0).expand({2, 2, 4});
  EXPECT_FALSE(v.is_contiguous());
  EXPECT_EQ(v.sizes(), (Shape{2, 2, 4}));
  Tensor c = v.contiguous();
  EXPECT_TRUE(c.is_contiguous());
  // v[a][i][k] = x[k][3][1 + 2 i]
  std::vector<double> expected;
  for (int a = 0; a < 2; ++a)
    for (int i = 0; i < 2; ++i)
      for (int k = 0; k < 4; ++k) expected.push_back(k * 30 + 3 * 6 + 1 + 2 * i);
  EXPECT_EQ(values(c), expected);
  EXPECT_TRUE(v.impl()->view_base() == x.impl_ptr());  // the root base, not an intermediate view
}

TEST(ViewGeometry, IntegerAndMetaTensors) {
  Tensor i = arange(12).view({3, 4});
  EXPECT_EQ(i.t().contiguous().to_vector<int64_t>(), (std::vector<int64_t>{0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11}));
  Tensor m = empty({2, 3, 4}, {.device = kMeta});
  Tensor v = m.permute({2, 0, 1}).slice(0, 1, 3).reshape({2, 6});
  EXPECT_TRUE(v.is_meta());
  EXPECT_EQ(v.sizes(), (Shape{2, 6}));
  EXPECT_THROW_MSG(m.view({5, 5}), "is invalid for input of size 24");
}

// ---- aliasing --------------------------------------------------------------------------------

TEST(ViewAliasing, WritesReachBaseAndBack) {
  Tensor x = zeros({3, 4}, {.dtype = kFloat64});
  Tensor row = x.select(0, 1);
  row.fill_(5.0);
  Tensor col = x.t().select(0, 2);
  col.add_(1.0);
  EXPECT_EQ(values(x), (std::vector<double>{0, 0, 1, 0, 5, 5, 6, 5, 0, 0, 1, 0}));
  x.mul_(2.0);
  EXPECT_EQ(values(row), (std::vector<double>{10, 10, 12, 10}));
  Tensor strided = x.view({12}).slice(0, 0, {}, 5);
  strided.zero_();
  EXPECT_EQ(values(x.view({12})), (std::vector<double>{0, 0, 2, 0, 10, 0, 12, 10, 0, 0, 0, 0}));
}

TEST(ViewAliasing, VersionCounterIsShared) {
  Tensor x = zeros({4});
  Tensor v = x.slice(0, 1, 3);
  Tensor w = v.unsqueeze(0);
  const uint64_t before = x.version();
  EXPECT_EQ(v.version(), before);
  w.add_(1.0);
  EXPECT_EQ(x.version(), before + 1);
  EXPECT_EQ(v.version(), before + 1);
  x.zero_();
  EXPECT_GT(w.version(), before + 1);
  EXPECT_EQ(w.version(), x.version());
}

// ---- gradients -------------------------------------------------------------------------------

struct GradCase {
  const char* name;
  Shape input;
  testing::TensorFn fn;
};

std::vector<GradCase> grad_cases() {
  return {
      {"view", {2, 6}, [](const TensorList& in) { return in[0].view({3, 4}); }},
      {"view_noncontiguous", {4, 6}, [](const TensorList& in) { return in[0].slice(1, 0, 4).view({2, 2, 4}); }},
      {"reshape_copy", {3, 4}, [](const TensorList& in) { return in[0].t().reshape({12}); }},
      {"flatten", {2, 3, 2}, [](const TensorList& in) { return in[0].flatten(1); }},
      {"slice", {4, 7}, [](const TensorList& in) { return in[0].slice(1, 1, 6, 2); }},
      {"slice_negative", {5, 3}, [](const TensorList& in) { return in[0].slice(0, -3, {}); }},
      {"narrow", {4, 5}, [](const TensorList& in) { return in[0].narrow(0, 1, 2); }},
      {"select", {3, 4}, [](const TensorList& in) { return in[0].select(1, -2); }},
      {"squeeze", {1, 3, 1}, [](const TensorList& in) { return in[0].squeeze(); }},
      {"squeeze_dim", {3, 1}, [](const TensorList& in) { return in[0].squeeze(1); }},
      {"unsqueeze", {3, 2}, [](const TensorList& in) { return in[0].unsqueeze(1); }},
      {"expand", {3, 1}, [](const TensorList& in) { return in[0].expand({2, 3, 4}); }},
      {"permute", {2, 3, 4}, [](const TensorList& in) { return in[0].permute({1, 2, 0}); }},
      {"transpose", {2, 3, 4}, [](const TensorList& in) { return in[0].transpose(0, 2); }},
      {"t", {3, 5}, [](const TensorList& in) { return in[0].t(); }},
      {"as_strided", {10}, [](const TensorList& in) { return in[0].as_strided({3, 2}, {3, 1}, 2); }},
      {"as_strided_overlap", {6}, [](const TensorList& in) { return in[0].as_strided({3, 3}, {1, 1}); }},
      {"as_strided_of_expand", {3},
       [](const TensorList& in) { return in[0].unsqueeze(0).expand({2, 3}).as_strided({2, 2}, {1, 1}); }},
      {"as_strided_of_slice", {4, 4},
       [](const TensorList& in) { return in[0].slice(0, 1, 3).as_strided({2, 3}, {2, 1}, 5); }},
      {"chain", {4, 5, 3},
       [](const TensorList& in) { return in[0].transpose(0, 1).select(2, 1).slice(0, 1, {}, 2).unsqueeze(1).transpose(0, 2); }},
  };
}

TEST(ViewGrad, GradcheckEveryViewOp) {
  for (const GradCase& c : grad_cases()) {
    SCOPED_TRACE(c.name);
    // Multiply by a non-uniform tensor so the second derivative is not trivially zero everywhere.
    testing::TensorFn fn = [&](const TensorList& in) {
      Tensor y = c.fn(in);
      return y * y;
    };
    Tensor x = random_tensor(c.input, kFloat64, true);
    expect_gradcheck(c.fn, {x});
    expect_gradgradcheck(fn, {x});
  }
}

TEST(ViewGrad, BackwardNodeNames) {
  Tensor x = random_tensor({3, 4}, kFloat64, true);
  EXPECT_EQ(x.view({12}).grad_fn()->name(), "ViewBackward0");
  EXPECT_EQ(x.slice(0, 1, {}).grad_fn()->name(), "SliceBackward0");
  EXPECT_EQ(x.select(0, 1).grad_fn()->name(), "SelectBackward0");
  EXPECT_EQ(x.t().grad_fn()->name(), "TBackward0");
  EXPECT_EQ(x.expand({2, 3, 4}).grad_fn()->name(), "ExpandBackward0");
  EXPECT_EQ(x.as_strided({2}, {1}).grad_fn()->name(), "AsStridedBackward0");
}

TEST(ViewGrad, InPlaceOnViewOfNonLeafRoutesGradThroughBase) {
  Tensor x = random_tensor({3, 4}, kFloat64, true);
  Tensor w = random_tensor({3, 4}, kFloat64);
  Tensor y = x * 2.0;
  Tensor row = y.select(0, 1);
  row.mul_(3.0);
  Tensor cols = y.slice(1, 0, 4, 2);
  cols.add_(1.0);
  EXPECT_EQ(y.grad_fn()->name(), "CopySlices");
  (y * w).sum().backward();
  std::vector<double> g = values(x.grad()), wv = values(w);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) EXPECT_NEAR(g[i * 4 + j], wv[i * 4 + j] * (i == 1 ? 6.0 : 2.0), 1e-12);
  // The view sees the write too, with a history that leads back to x.
  EXPECT_TRUE(row.requires_grad());
  EXPECT_NEAR(row.sum().item<double>(), y.select(0, 1).sum().item<double>(), 1e-12);
}

TEST(ViewGrad, InPlaceOnViewGradcheck) {
  testing::TensorFn fn = [](const TensorList& in) {
    Tensor y = in[0] * 1.5;
    Tensor v = y.transpose(0, 1).slice(0, 1, 3);
    v.mul_(in[1]);
    return y * y;
  };
  expect_gradcheck(fn, {random_tensor({3, 4}, kFloat64, true), random_tensor({2, 3}, kFloat64, true)});
  expect_gradgradcheck(fn, {random_tensor({3, 4}, kFloat64, true), random_tensor({2, 3}, kFloat64, true)});
}

TEST(ViewGrad, InPlaceOnViewOfLeafErrors) {
  Tensor x = random_tensor({3, 4}, kFloat64, true);
  EXPECT_THROW_MSG(x.select(0, 1).mul_(2.0), "a view of a leaf Variable that requires grad");
  {
    NoGradGuard no_grad;
    x.select(0, 1).mul_(2.0);  // allowed without recording
  }
}

// A view made to require grad is a leaf of its own: views of it are views of a leaf that requires grad,
// and a write through one is rejected instead of grafting history onto the tensor it was cut from.
TEST(ViewGrad, ALeafViewThatRequiresGradIsItsOwnRoot) {
  Tensor cut_from = random_tensor({4, 1}, kFloat64, false);
  Tensor leaf = cut_from.transpose(0, 1);
  leaf.requires_grad_(true);
  Tensor view = leaf.reshape({1, 4});
  EXPECT_THROW_MSG(view.copy_(leaf.abs()), "a view of a leaf Variable that requires grad");
  EXPECT_FALSE(cut_from.requires_grad());
  Tensor loss = (leaf * leaf).sum();
  loss.backward();
  expect_close(leaf.grad(), leaf.detach() * 2.0);
}

TEST(ViewGrad, ExpandedViewCannotBeWrittenInPlace) {
  Tensor x = zeros({3, 1});
  EXPECT_THROW_MSG(x.expand({3, 4}).add_(1.0), "more than one element of the written-to tensor");
}

// ---- resize_ and set_ ------------------------------------------------------------------------

TEST(Resize, GrowsKeepsDataAndMakesContiguous) {
  Tensor x = iota({2, 3}).clone();
  x.resize_({3, 4});
  EXPECT_EQ(x.sizes(), (Shape{3, 4}));
  EXPECT_EQ(x.strides(), (Shape{4, 1}));
  std::vector<double> v = values(x);
  EXPECT_EQ(std::vector<double>(v.begin(), v.begin() + 6), (std::vector<double>{0, 1, 2, 3, 4, 5}));
  x.resize_({2});
  EXPECT_EQ(values(x), (std::vector<double>{0, 1}));
  EXPECT_GE(x.impl()->storage()->nbytes(), 12 * 8);
  Tensor t = iota({3, 2}).t();
  t.resize_({2, 3});  // same sizes: geometry kept
  EXPECT_EQ(t.strides(), (Shape{1, 2}));
  Tensor e = empty({0});
  e.resize_({20}).fill_(2.0);
  EXPECT_EQ(e.sum().item<float>(), 40.0f);
}

TEST(Resize, ViewsSeeGrownStorageAndVersionBumps) {
  Tensor x = zeros({4}, {.dtype = kFloat64});
  Tensor v = x.slice(0, 1, 3);
  const uint64_t before = x.version();
  x.resize_({100});
  EXPECT_EQ(x.version(), before + 1);
  x.fill_(7.0);
  EXPECT_EQ(values(v), (std::vector<double>{7, 7}));
}

TEST(Resize, Errors) {
  Tensor x = random_tensor({3}, kFloat64, true);
  EXPECT_THROW_MSG(x.resize_({4}), "cannot resize variables that require grad");
  Tensor y = zeros({2});
  EXPECT_THROW_MSG(y.resize_({-1, 2}), "negative dimension -1");
}

TEST(Resize, WorksOnMetaTensors) {
  Tensor m = empty({2}, {.device = kMeta});
  m.resize_({4, 5});
  EXPECT_EQ(m.sizes(), (Shape{4, 5}));
  EXPECT_EQ(m.strides(), (Shape{5, 1}));
  EXPECT_GE(m.impl()->storage()->nbytes(), 20 * 4);
  Tensor s = empty({3, 3}, {.device = kMeta});
  m.set_(s.t());
  EXPECT_EQ(m.strides(), (Shape{1, 3}));
}

TEST(Set, SharesStorageAndGeometry) {
  Tensor src = iota({3, 4});
  Tensor x = zeros({5}, {.dtype = kFloat64});
  x.set_(src.t().slice(0, 1, 3));
  EXPECT_TRUE(x.impl()->storage() == src.impl()->storage());
  expect_geometry(x, {2, 3}, {1, 4}, 1);
  x.fill_(-1.0);
  EXPECT_EQ(values(src.select(1, 1)), (std::vector<double>{-1, -1, -1}));
  EXPECT_EQ(x.version(), src.version());
  EXPECT_THROW_MSG(x.set_(zeros({2})), "expected source of dtype float64");
}

TEST(Set, LeafRequiringGradErrorsAndGradFlowsToSource) {
  Tensor leaf = random_tensor({3}, kFloat64, true);
  EXPECT_THROW_MSG(leaf.set_(zeros({3}, {.dtype = kFloat64})), "a leaf Variable that requires grad");
  Tensor src = random_tensor({3}, kFloat64, true);
  Tensor x = zeros({1}, {.dtype = kFloat64});
  x.set_(src * 2.0);
  EXPECT_EQ(x.grad_fn()->name(), "SetBackward0");
  (x * x).sum().backward();
  expect_close(src.grad(), src * 8.0);
}

// ---- CUDA ------------------------------------------------------------------------------------

TEST(ViewCuda, ViewsAndContiguousMatchCpu) {
  TG_REQUIRE_CUDA();
  const Tensor x = random_tensor({4, 5, 6}, kFloat32);
  expect_cuda_matches_cpu([](const TensorList& in) { return in[0].transpose(0, 2).contiguous(); }, {x});
  expect_cuda_matches_cpu([](const TensorList& in) { return in[0].slice(1, 1, 5, 3).select(2, 4).contiguous(); }, {x});
  expect_cuda_matches_cpu([](const TensorList& in) { return in[0][1].unsqueeze(0).expand({3, 5, 6}).contiguous(); },
                          {x});
  expect_cuda_matches_cpu([](const TensorList& in) { return in[0].as_strided({3, 3}, {7, 2}, 5).contiguous(); }, {x});
  expect_cuda_matches_cpu([](const TensorList& in) { return in[0].permute({1, 2, 0}).reshape({-1, 4}); }, {x});
}

TEST(ViewCuda, GradientsMatchCpu) {
  TG_REQUIRE_CUDA();
  const Tensor x = random_tensor({4, 6}, kFloat64);
  expect_cuda_matches_cpu(
      [](const TensorList& in) {
        Tensor p = in[0].detach().requires_grad_();
        Tensor y = p.t().slice(0, 1, 5, 2).as_strided({2, 2}, {1, 1}, 3) * 3.0;
        y.sum().backward();
        return p.grad();
      },
      {x});
}

TEST(ViewCuda, ResizeGrowsDeviceStorage) {
  TG_REQUIRE_CUDA();
  Tensor x = arange(6, {.dtype = kFloat32, .device = cuda_device()});
  x.resize_({2, 5});
  std::vector<float> v = x.to_vector<float>();
  EXPECT_EQ(std::vector<float>(v.begin(), v.begin() + 6), (std::vector<float>{0, 1, 2, 3, 4, 5}));
}

}  // namespace
}  // namespace tg
