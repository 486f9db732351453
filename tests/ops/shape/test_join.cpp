// Joining and gathering: cat, stack, index_select and index_add — values, promotion, errors,
// first and second derivatives, and CPU-vs-CUDA agreement.
#include <vector>

#include "support/test_support.h"
#include "tensor/cuda_runtime.h"

namespace tg {
namespace {

using testing::expect_close;
using testing::expect_cuda_matches_cpu;
using testing::expect_gradcheck;
using testing::expect_gradgradcheck;
using testing::random_tensor;

Tensor iota(const Shape& sizes, DType dtype = kFloat64) {
  return arange(shape_numel(sizes), {.dtype = dtype}).view(sizes).clone();
}

std::vector<double> values(const Tensor& t) { return t.to_vector<double>(); }

Tensor index_of(std::initializer_list<int64_t> v) { return tensor(v); }

// ---- cat / stack -----------------------------------------------------------------------------

TEST(Cat, AlongEachDim) {
  Tensor a = iota({2, 2});
  Tensor b = iota({2, 3}) + 10.0;
  Tensor c = cat({a, b}, 1);
  EXPECT_EQ(c.sizes(), (Shape{2, 5}));
  EXPECT_EQ(values(c), (std::vector<double>{0, 1, 10, 11, 12, 2, 3, 13, 14, 15}));
  Tensor d = cat({a, a.t()}, -2);
  EXPECT_EQ(values(d), (std::vector<double>{0, 1, 2, 3, 0, 2, 1, 3}));
  EXPECT_TRUE(d.is_contiguous());
}

TEST(Cat, NonContiguousInputsAndPromotion) {
  Tensor a = iota({3, 4}).t().slice(0, 0, 4, 2);  // [2, 3], strided
  Tensor b = iota({1, 3}, kInt32);
  Tensor c = cat({a, b});
  EXPECT_EQ(c.dtype(), kFloat64);
  EXPECT_EQ(values(c), (std::vector<double>{0, 4, 8, 2, 6, 10, 0, 1, 2}));
  Tensor i = cat({iota({2}, kInt32), iota({1}, kInt64)});
  EXPECT_EQ(i.dtype(), kInt64);
  Tensor bools = cat({ones({2}, {.dtype = kBool}), zeros({1}, {.dtype = kBool})});
  EXPECT_EQ(bools.dtype(), kBool);
  EXPECT_EQ(values(bools), (std::vector<double>{1, 1, 0}));
}

TEST(Cat, SkipsEmptyOneDimTensors) {
  Tensor a = iota({2, 3});
  Tensor empty1 = zeros({0});
  Tensor c = cat({empty1, a, empty1, a}, 0);
  EXPECT_EQ(c.sizes(), (Shape{4, 3}));
  EXPECT_EQ(cat({empty1, empty1}).sizes(), (Shape{0}));
  // An empty tensor with other dims is not skipped: its other sizes must match.
  EXPECT_EQ(cat({zeros({0, 3}, {.dtype = kFloat64}), a}).sizes(), (Shape{2, 3}));
  EXPECT_THROW_MSG(cat({zeros({0, 2}, {.dtype = kFloat64}), a}), "Sizes of tensors must match except in dimension 0");
}

TEST(Cat, Errors) {
  Tensor a = iota({2, 3});
  EXPECT_THROW_MSG(cat({a, iota({2, 4})}, 0),
                   "Sizes of tensors must match except in dimension 0. Expected size 3 but got size 4 for tensor "
                   "number 1 in the list");
  EXPECT_THROW_MSG(cat({a, iota({2, 3, 1})}), "Tensors must have same number of dimensions: got 2 and 3");
  EXPECT_THROW_MSG(cat({a, iota({})}), "zero-dimensional tensor (at position 1) cannot be concatenated");
  EXPECT_THROW_MSG(cat({}), "expected a non-empty list of Tensors");
  EXPECT_THROW_MSG(cat({a, a}, 2), "dimension out of range");
}

TEST(Stack, NewDimAnywhere) {
  Tensor a = iota({2, 2});
  Tensor b = a + 4.0;
  EXPECT_EQ(stack({a, b}).sizes(), (Shape{2, 2, 2}));
  EXPECT_EQ(values(stack({a, b})), (std::vector<double>{0, 1, 2, 3, 4, 5, 6, 7}));
  Tensor s = stack({a, b}, -1);
  EXPECT_EQ(s.sizes(), (Shape{2, 2, 2}));
  EXPECT_EQ(values(s), (std::vector<double>{0, 4, 1, 5, 2, 6, 3, 7}));
  EXPECT_EQ(stack({iota({}), iota({})}).sizes(), (Shape{2}));
  EXPECT_THROW_MSG(stack({a, iota({2, 3})}), "stack expects each tensor to be equal size, but got [2, 2] at entry 0 and "
                   "[2, 3] at entry 1");
  EXPECT_THROW_MSG(stack({}), "stack expects a non-empty TensorList");
  EXPECT_THROW_MSG(stack({a}, 3), "dimension out of range");
}

TEST(Cat, Gradients) {
  testing::TensorFn f = [](const TensorList& in) {
    Tensor c = cat({in[0], in[1].t(), in[2]}, 1);
    return c * c;
  };
  TensorList inputs{random_tensor({3, 2}, kFloat64, true), random_tensor({4, 3}, kFloat64, true),
                    random_tensor({3, 1}, kFloat64, true)};
  expect_gradcheck(f, inputs);
  expect_gradgradcheck(f, inputs);
  testing::TensorFn g = [](const TensorList& in) {
    Tensor s = stack({in[0], in[1] * 2.0, in[0]}, 1);
    return s * s;
  };
  TensorList pair{random_tensor({2, 3}, kFloat64, true), random_tensor({2, 3}, kFloat64, true)};
  expect_gradcheck(g, pair);
  expect_gradgradcheck(g, pair);
}

TEST(Cat, GradientToSkippedAndPromotedInputs) {
  Tensor e = zeros({0}, {.dtype = kFloat64}).requires_grad_();
  Tensor a = random_tensor({2, 2}, kFloat32, true);
  Tensor b = random_tensor({1, 2}, kFloat64, true);
  Tensor c = cat({e, a, b});
  EXPECT_EQ(c.dtype(), kFloat64);
  EXPECT_EQ(c.grad_fn()->name(), "CatBackward0");
  (c * 2.0).sum().backward();
  EXPECT_EQ(e.grad().sizes(), (Shape{0}));
  EXPECT_EQ(a.grad().dtype(), kFloat32);
  expect_close(a.grad(), full({2, 2}, 2.0));
  expect_close(b.grad(), full({1, 2}, 2.0));
}

TEST(CatCuda, PiecesSideBySideMatchCpu) {
  TG_REQUIRE_CUDA();
  // Along the last dim each piece is a strided copy with a contiguous innermost dim: whole 16-byte
  // vectors where the pieces' widths allow (768 bfloat16 or float32 columns), element by element
  // where they do not (an odd width), and through views (a transposed piece).
  for (DType dt : {kBFloat16, kFloat32, kFloat64, kInt64, kBool}) {
    SCOPED_TRACE(dtype_name(dt));
    const Tensor a = random_tensor({64, 768}, kFloat32).to(dt), b = random_tensor({64, 768}, kFloat32).to(dt);
    const Tensor c = random_tensor({64, 5}, kFloat32).to(dt), d = random_tensor({768, 64}, kFloat32).to(dt);
    expect_cuda_matches_cpu([](const TensorList& v) { return cat({v[0], v[1], v[0]}, -1); }, {a, b}, 0, 0);
    expect_cuda_matches_cpu([](const TensorList& v) { return cat({v[0], v[1], v[2]}, 1); }, {a, c, b}, 0, 0);
    expect_cuda_matches_cpu([](const TensorList& v) { return cat({v[0], v[1].t()}, 1); }, {a, d}, 0, 0);
    expect_cuda_matches_cpu([](const TensorList& v) { return v[0].narrow(1, 8, 512).contiguous(); }, {a}, 0, 0);
  }
}

// ---- index_select / index_add ----------------------------------------------------------------

TEST(IndexSelect, Values) {
  Tensor x = iota({3, 4});
  EXPECT_EQ(values(x.index_select(0, index_of({2, 0, 2}))),
            (std::vector<double>{8, 9, 10, 11, 0, 1, 2, 3, 8, 9, 10, 11}));
  Tensor idx32 = tensor({3, 1}, {.dtype = kInt32});
  Tensor cols = index_select(x, -1, idx32);
  EXPECT_EQ(cols.sizes(), (Shape{3, 2}));
  EXPECT_EQ(values(cols), (std::vector<double>{3, 1, 7, 5, 11, 9}));
  // Non-contiguous input and index.
  Tensor xt = x.t();
  Tensor strided_idx = index_of({0, 9, 2, 9}).slice(0, 0, {}, 2);
  EXPECT_EQ(values(xt.index_select(1, strided_idx)), (std::vector<double>{0, 8, 1, 9, 2, 10, 3, 11}));
  EXPECT_EQ(x.index_select(0, index_of({})).sizes(), (Shape{0, 4}));
  EXPECT_EQ(iota({}).index_select(0, index_of({0})).sizes(), (Shape{}));
  Tensor ints = iota({4}, kInt64);
  EXPECT_EQ(ints.index_select(0, index_of({3, 3})).to_vector<int64_t>(), (std::vector<int64_t>{3, 3}));
}

TEST(IndexSelect, Errors) {
  Tensor x = iota({3, 4});
  EXPECT_THROW_MSG(x.index_select(0, index_of({0, 3})), "index 3 is out of range for dimension 0 with size 3");
  EXPECT_THROW_MSG(x.index_select(1, index_of({-1})), "index -1 is out of range for dimension 1 with size 4");
  EXPECT_THROW_MSG(x.index_select(0, tensor({0.0f})), "Expected dtype int32/int64 for index, got float32");
  EXPECT_THROW_MSG(x.index_select(0, index_of({0, 1}).view({1, 2})), "Index is supposed to be a vector");
  EXPECT_THROW_MSG(x.index_select(2, index_of({0})), "dimension out of range");
}

TEST(IndexAdd, AccumulatesRepeats) {
  Tensor x = zeros({3, 2}, {.dtype = kFloat64});
  Tensor src = iota({4, 2}) + 1.0;
  Tensor y = index_add(x, 0, index_of({2, 0, 2, 2}), src);
  EXPECT_EQ(values(y), (std::vector<double>{3, 4, 0, 0, 1 + 5 + 7, 2 + 6 + 8}));
  EXPECT_EQ(values(x), (std::vector<double>(6, 0.0)));  // out of place
  Tensor cols = index_add(iota({2, 3}), 1, tensor({1, 1}, {.dtype = kInt32}), ones({2, 2}, {.dtype = kFloat64}));
  EXPECT_EQ(values(cols), (std::vector<double>{0, 3, 2, 3, 6, 5}));
  EXPECT_THROW_MSG(index_add(x, 0, index_of({0}), ones({1, 3}, {.dtype = kFloat64})), "does not match [1, 2]");
  EXPECT_THROW_MSG(index_add(x, 0, index_of({5}), ones({1, 2}, {.dtype = kFloat64})), "out of range");
  EXPECT_THROW_MSG(index_add(x, 0, index_of({0}), ones({1, 2})), "must have the same scalar type");
}

TEST(IndexSelect, Gradients) {
  Tensor idx = index_of({1, 0, 1, 3});
  testing::TensorFn f = [&](const TensorList& in) {
    Tensor y = in[0].index_select(1, idx);
    return y * y;
  };
  expect_gradcheck(f, {random_tensor({2, 4, 3}, kFloat64, true)});
  expect_gradgradcheck(f, {random_tensor({2, 4, 3}, kFloat64, true)});
  testing::TensorFn g = [&](const TensorList& in) {
    Tensor y = index_add(in[0], 0, idx, in[1]);
    return y * y;
  };
  TensorList inputs{random_tensor({5, 2}, kFloat64, true), random_tensor({4, 2}, kFloat64, true)};
  expect_gradcheck(g, inputs);
  expect_gradgradcheck(g, inputs);
  Tensor x = random_tensor({3, 2}, kFloat64, true);
  EXPECT_EQ(x.index_select(0, idx.slice(0, 0, 2)).grad_fn()->name(), "IndexSelectBackward0");
}

// ---- CUDA ------------------------------------------------------------------------------------

TEST(JoinCuda, CatStackMatchCpu) {
  TG_REQUIRE_CUDA();
  TensorList in{random_tensor({3, 4}, kFloat32), random_tensor({5, 3}, kFloat32), random_tensor({3, 2}, kFloat32)};
  expect_cuda_matches_cpu([](const TensorList& t) { return cat({t[0], t[1].t(), t[2]}, 1); }, in);
  expect_cuda_matches_cpu([](const TensorList& t) { return stack({t[0], t[1].t().slice(1, 0, 4)}, 2); }, in);
  TensorList mixed{random_tensor({2, 3}, kFloat32), iota({1, 3}, kInt64)};
  expect_cuda_matches_cpu([](const TensorList& t) { return cat({t[0], t[1]}); }, mixed);
}

TEST(JoinCuda, IndexSelectAndAddMatchCpu) {
  TG_REQUIRE_CUDA();
  TensorList in{random_tensor({4, 5, 3}, kFloat64), index_of({4, 0, 4, 2, 1, 4}),
                tensor({2, 0, 2}, {.dtype = kInt32})};
  expect_cuda_matches_cpu([](const TensorList& t) { return t[0].index_select(1, t[1]); }, in);
  expect_cuda_matches_cpu([](const TensorList& t) { return t[0].transpose(0, 2).index_select(2, t[2]); }, in);
  expect_cuda_matches_cpu([](const TensorList& t) { return iota({4}, kInt64).to(t[1].device()).index_select(0, t[2]); },
                          in);
  expect_cuda_matches_cpu(
      [](const TensorList& t) {
        Tensor src = ones({4, 6, 3}, {.dtype = kFloat64, .device = t[0].device()}).transpose(0, 2);
        return index_add(t[0].transpose(0, 2), 1, t[1], src);
      },
      in);
  expect_cuda_matches_cpu(
      [](const TensorList& t) {
        Tensor p = t[0].detach().requires_grad_();
        Tensor y = p.index_select(1, t[1]);
        (y * y).sum().backward();
        return p.grad();
      },
      in);
}

TEST(JoinCuda, IndexOutOfRangeIsReported) {
  TG_REQUIRE_CUDA();
  Tensor x = iota({3, 4}).cuda();
  // Kernels report a bad index on the device (no synchronization per call); it is raised at the
  // next point where the host synchronizes.
  Tensor selected = x.index_select(0, index_of({0, 7}).cuda());
  EXPECT_THROW_MSG(selected.cpu(), "[index_select] index 7 is out of range for dimension 0 with size 3");
  Tensor added = index_add(x, 1, index_of({4}).cuda(), ones({3, 1}, {.dtype = kFloat64}).cuda());
  EXPECT_THROW_MSG(cuda::synchronize(0), "[index_add] index 4 is out of range for dimension 1 with size 4");
  EXPECT_THROW_MSG(x.index_select(0, index_of({0})), "expected index on cuda:0");
  // The device is still usable afterwards.
  EXPECT_EQ(x.index_select(0, index_of({2}).cuda()).sum().item<double>(), 8.0 + 9 + 10 + 11);
}

}  // namespace
}  // namespace tg
