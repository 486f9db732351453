// Non-random factories: shapes, dtypes, devices, values, conversions and errors.
#include <cmath>

#include "ops/core/dispatch.h"
#include "support/test_support.h"

namespace tg {
namespace {

// Records every op dispatched while it is installed.
struct CaptureOps : OpObserver {
  void before_op(const OpPtr&, TensorList&) override {}
  bool wants_fake_outputs(const OpPtr&, const TensorList&) override { return false; }
  std::vector<OpPtr> ops;
  std::vector<size_t> input_counts;
  void on_op(const OpPtr& op, const TensorList& inputs, const TensorList&) override {
    ops.push_back(op);
    input_counts.push_back(inputs.size());
  }
};

TEST(Empty, ShapesDtypesDevices) {
  Tensor a = empty({2, 3});
  EXPECT_EQ(a.sizes(), (Shape{2, 3}));
  EXPECT_EQ(a.strides(), (Shape{3, 1}));
  EXPECT_EQ(a.dtype(), kFloat32);
  EXPECT_TRUE(a.is_cpu());
  for (DType dt : {kBool, kInt32, kInt64, kFloat32, kFloat64}) {
    Tensor t = empty({4}, {.dtype = dt});
    EXPECT_EQ(t.dtype(), dt);
    EXPECT_EQ(t.impl()->storage()->nbytes(), 4 * dtype_size(dt));
  }
  EXPECT_EQ(empty({}).dim(), 0);
  EXPECT_EQ(empty({}).numel(), 1);
  EXPECT_EQ(empty({3, 0}).numel(), 0);
}

TEST(Empty, StridedStorageCoversTheSpan) {
  Tensor t = empty_strided({2, 3}, {1, 4}, {.dtype = kFloat64});
  EXPECT_EQ(t.sizes(), (Shape{2, 3}));
  EXPECT_EQ(t.strides(), (Shape{1, 4}));
  EXPECT_FALSE(t.is_contiguous());
  // Last element at 1 * 1 + 2 * 4 = 9, so ten doubles.
  EXPECT_GE(t.impl()->storage()->nbytes(), 10 * 8);
  double* p = t.data_ptr<double>();
  p[9] = 1.5;  // must be addressable
  EXPECT_EQ(t.to_vector<double>()[5], 1.5);
  EXPECT_EQ(empty_strided({2, 0}, {5, 7}).numel(), 0);
  EXPECT_THROW_MSG(empty_strided({2, 3}, {1}), "[empty_strided] got 2 sizes [2, 3] but 1 strides [1]");
  EXPECT_THROW_MSG(empty_strided({2}, {-1}), "[empty_strided] strides must be non-negative, got [-1]");
}

TEST(Full, ZerosOnesFullEveryDtype) {
  EXPECT_EQ(zeros({2, 2}, {.dtype = kInt64}).to_vector<int64_t>(), (std::vector<int64_t>{0, 0, 0, 0}));
  EXPECT_EQ(ones({3}, {.dtype = kInt32}).to_vector<int32_t>(), (std::vector<int32_t>{1, 1, 1}));
  EXPECT_EQ(ones({2}, {.dtype = kBool}).to_vector<bool>(), (std::vector<bool>{true, true}));
  EXPECT_EQ(zeros({2}, {.dtype = kBool}).to_vector<bool>(), (std::vector<bool>{false, false}));
  EXPECT_EQ(zeros({2}).to_vector<float>(), (std::vector<float>{0.f, 0.f}));
  EXPECT_EQ(ones({2}, {.dtype = kFloat64}).to_vector<double>(), (std::vector<double>{1.0, 1.0}));
  EXPECT_EQ(full({2, 1}, 2.5).to_vector<float>(), (std::vector<float>{2.5f, 2.5f}));
  EXPECT_EQ(full({2}, 0.1, {.dtype = kFloat64}).to_vector<double>(), (std::vector<double>{0.1, 0.1}));
  EXPECT_EQ(full({2}, int64_t{1} << 40, {.dtype = kInt64}).to_vector<int64_t>(),
            (std::vector<int64_t>{int64_t{1} << 40, int64_t{1} << 40}));
  EXPECT_EQ(full({2}, -7, {.dtype = kInt32}).to_vector<int32_t>(), (std::vector<int32_t>{-7, -7}));
  EXPECT_EQ(full({1}, 3.9, {.dtype = kInt64}).to_vector<int64_t>(), (std::vector<int64_t>{3}));
  EXPECT_EQ(full({1}, true, {.dtype = kFloat32}).to_vector<float>(), (std::vector<float>{1.f}));
  EXPECT_EQ(full({1}, 0.5, {.dtype = kBool}).to_vector<bool>(), (std::vector<bool>{true}));
  EXPECT_EQ(full({}, 4).dim(), 0);
  EXPECT_EQ(full({}, 4).item<float>(), 4.f);
}

TEST(Full, NegativeSizesError) {
  EXPECT_THROW_MSG(zeros({2, -1}), "[zeros] trying to create a tensor with negative dimension -1: sizes [2, -1]");
  EXPECT_THROW_MSG(ones({-3}), "[ones] trying to create a tensor with negative dimension -3");
  EXPECT_THROW_MSG(full({-3}, 1), "[full] trying to create a tensor with negative dimension -3");
  EXPECT_THROW_MSG(empty({-1}), "[empty] trying to create a tensor with negative dimension -1");
}

TEST(Factory, RequiresGradOption) {
  Tensor t = zeros({2}, {.requires_grad = true});
  EXPECT_TRUE(t.requires_grad());
  EXPECT_TRUE(t.is_leaf());
  EXPECT_FALSE(ones({2}).requires_grad());
  EXPECT_TRUE(arange(0.0, 1.0, 0.5, {.dtype = kFloat64, .requires_grad = true}).requires_grad());
  EXPECT_THROW_MSG(zeros({2}, {.dtype = kInt64, .requires_grad = true}), "only Tensors of floating point dtype");
}

TEST(Factory, DispatchedAsInputlessOps) {
  CaptureOps capture;
  {
    OpObserverGuard guard(&capture);
    zeros({2, 3});
    full({1}, 2.5, {.dtype = kFloat64});
    arange(4);
    tensor({1, 2, 3});
    scalar_tensor(7);
    empty_strided({2}, {3});
  }
  ASSERT_EQ(capture.ops.size(), 6u);
  std::vector<std::string> names;
  for (size_t i = 0; i < capture.ops.size(); ++i) {
    names.emplace_back(capture.ops[i]->name());
    EXPECT_TRUE(capture.ops[i]->has(kFactory));
    EXPECT_FALSE(capture.ops[i]->has(kRandom));
    EXPECT_EQ(capture.input_counts[i], 0u);
  }
  EXPECT_EQ(names, (std::vector<std::string>{"zeros", "full", "arange", "tensor", "scalar_tensor", "empty_strided"}));
  EXPECT_EQ(capture.ops[0]->attrs(), "size=[2, 3], dtype=float32, device=cpu");
  EXPECT_EQ(capture.ops[1]->attrs(), "size=[1], dtype=float64, device=cpu, value=2.5");
  EXPECT_EQ(capture.ops[2]->attrs(), "start=0, end=4, step=1, dtype=int64, device=cpu");
  EXPECT_EQ(capture.ops[3]->attrs(), "size=[3], dtype=int32, device=cpu, values=[1, 2, 3]");
  EXPECT_EQ(capture.ops[4]->attrs(), "size=[], dtype=int64, device=cpu, value=7");
  EXPECT_EQ(capture.ops[5]->attrs(), "size=[2], dtype=float32, device=cpu, stride=[3]");
  // Re-running a factory op object makes a fresh tensor with the same values.
  Tensor again = dispatch1(capture.ops[3], {});
  EXPECT_EQ(again.to_vector<int32_t>(), (std::vector<int32_t>{1, 2, 3}));
}

TEST(Arange, IntegerForms) {
  Tensor a = arange(5);
  EXPECT_EQ(a.dtype(), kInt64);
  EXPECT_EQ(a.to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(arange(3, {.dtype = kFloat64}).to_vector<double>(), (std::vector<double>{0, 1, 2}));
  EXPECT_EQ(arange(0).numel(), 0);
  EXPECT_EQ(arange(2, 11, 3, {.dtype = kInt32}).to_vector<int32_t>(), (std::vector<int32_t>{2, 5, 8}));
  // Exact int64 arithmetic beyond 2^53, where start + 1 rounds back to start in double.
  const double big = 9007199254740992.0;  // 2^53
  EXPECT_EQ(arange(big, big + 4, 1, {.dtype = kInt64}).to_vector<int64_t>(),
            (std::vector<int64_t>{9007199254740992, 9007199254740993, 9007199254740994, 9007199254740995}));
}

TEST(Arange, FloatAndNegativeSteps) {
  Tensor a = arange(0, 1, 0.1);
  EXPECT_EQ(a.dtype(), kFloat32);
  ASSERT_EQ(a.numel(), 10);
  std::vector<float> av = a.to_vector<float>();
  for (int i = 0; i < 10; ++i) EXPECT_FLOAT_EQ(av[static_cast<size_t>(i)], 0.1f * static_cast<float>(i));
  EXPECT_EQ(arange(1, 2.5, 0.5, {.dtype = kFloat64}).to_vector<double>(), (std::vector<double>{1.0, 1.5, 2.0}));
  // The count is ceil((end - start) / step).
  EXPECT_EQ(arange(0, 10, 3).numel(), 4);
  EXPECT_EQ(arange(0, 9, 3).numel(), 3);
  EXPECT_EQ(arange(0, 1.01, 0.25).numel(), 5);
  EXPECT_EQ(arange(10, 0, -3, {.dtype = kInt64}).to_vector<int64_t>(), (std::vector<int64_t>{10, 7, 4, 1}));
  EXPECT_EQ(arange(1, -1, -0.5, {.dtype = kFloat64}).to_vector<double>(), (std::vector<double>{1, 0.5, 0, -0.5}));
  EXPECT_EQ(arange(3, 3).numel(), 0);
  // Fractional steps on integer dtypes compute in double and truncate toward zero.
  EXPECT_EQ(arange(0, 2, 0.5, {.dtype = kInt64}).to_vector<int64_t>(), (std::vector<int64_t>{0, 0, 1, 1}));
}

TEST(Arange, Errors) {
  EXPECT_THROW_MSG(arange(0, 5, 0), "[arange] expected a finite nonzero step, got 0");
  EXPECT_THROW_MSG(arange(5, 0, 1), "[arange] end 0 is below start 5 but step 1 is positive");
  EXPECT_THROW_MSG(arange(0, 5, -1), "[arange] end 5 is above start 0 but step -1 is negative");
  EXPECT_THROW_MSG(arange(-2), "[arange] end -2 is below start 0");
  EXPECT_THROW_MSG(arange(0, INFINITY, 1), "[arange] expected finite start and end");
  EXPECT_THROW_MSG(arange(3, {.dtype = kBool}), "[arange] expected a numeric dtype, got bool");
}

TEST(FromVector, ValuesAndConversions) {
  Tensor a = from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_EQ(a.sizes(), (Shape{2, 3}));
  EXPECT_EQ(a.dtype(), kFloat32);
  EXPECT_EQ(a.to_vector<float>(), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(from_vector<double>({1.9, -1.9, 0.2}, {3}, {.dtype = kInt64}).to_vector<int64_t>(),
            (std::vector<int64_t>{1, -1, 0}));
  EXPECT_EQ(from_vector<int64_t>({0, 3, -1}, {3}, {.dtype = kBool}).to_vector<bool>(),
            (std::vector<bool>{false, true, true}));
  EXPECT_EQ(from_vector<bool>({true, false}, {2}, {.dtype = kFloat64}).to_vector<double>(),
            (std::vector<double>{1.0, 0.0}));
  EXPECT_EQ(from_vector<int32_t>({7}, {}).dim(), 0);
  EXPECT_EQ(from_vector<int32_t>({7}, {}).item<int32_t>(), 7);
  Tensor d = from_vector<double>({0.1, 0.2}, {2}, {.dtype = kFloat32});
  EXPECT_EQ(d.to_vector<float>(), (std::vector<float>{0.1f, 0.2f}));
  EXPECT_EQ(from_vector<float>({}, {0, 4}).numel(), 0);
}

TEST(FromVector, Errors) {
  EXPECT_THROW_MSG(from_vector<float>({1, 2, 3, 4, 5}, {2, 3}),
                   "[from_vector] 5 values given for sizes [2, 3] (6 elements)");
  EXPECT_THROW_MSG(from_vector<float>({1}, {-1}), "[from_vector] trying to create a tensor with negative dimension -1");
}

TEST(TensorLiteral, DtypesFromValues) {
  EXPECT_EQ(tensor({1.f, 2.f}).dtype(), kFloat32);
  EXPECT_EQ(tensor({1.0, 2.0}).dtype(), kFloat64);
  EXPECT_EQ(tensor({int64_t{1}}).dtype(), kInt64);
  EXPECT_EQ(tensor({true, false}).dtype(), kBool);
  Tensor t = tensor({1, 2, 3}, {.dtype = kFloat64});
  EXPECT_EQ(t.sizes(), (Shape{3}));
  EXPECT_EQ(t.to_vector<double>(), (std::vector<double>{1, 2, 3}));
}

TEST(ScalarTensor, DtypeFromValueOrOptions) {
  Tensor i = scalar_tensor(3);
  EXPECT_EQ(i.dim(), 0);
  EXPECT_EQ(i.dtype(), kInt64);
  EXPECT_EQ(i.item<int64_t>(), 3);
  EXPECT_EQ(scalar_tensor(2.5).dtype(), kFloat32);
  EXPECT_EQ(scalar_tensor(2.5).item<float>(), 2.5f);
  EXPECT_EQ(scalar_tensor(true).dtype(), kBool);
  Tensor d = scalar_tensor(2, {.dtype = kFloat64});
  EXPECT_EQ(d.dtype(), kFloat64);
  EXPECT_EQ(d.item<double>(), 2.0);
}

TEST(LikeForms, TakeSizesDtypeDevice) {
  Tensor base = from_vector<double>({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor nc = base.t();  // non-contiguous; the result is contiguous with the same sizes
  Tensor z = zeros_like(nc);
  EXPECT_EQ(z.sizes(), (Shape{3, 2}));
  EXPECT_EQ(z.dtype(), kFloat64);
  EXPECT_TRUE(z.is_contiguous());
  EXPECT_EQ(z.to_vector<double>(), std::vector<double>(6, 0.0));
  EXPECT_EQ(ones_like(base).to_vector<double>(), std::vector<double>(6, 1.0));
  EXPECT_EQ(full_like(base, 4).to_vector<double>(), std::vector<double>(6, 4.0));
  Tensor e = empty_like(zeros({4}, {.dtype = kInt32}));
  EXPECT_EQ(e.dtype(), kInt32);
  EXPECT_EQ(e.sizes(), (Shape{4}));
  EXPECT_EQ(full_like(zeros({2}, {.dtype = kInt64}), 9).to_vector<int64_t>(), (std::vector<int64_t>{9, 9}));
  EXPECT_FALSE(zeros_like(zeros({2}, {.requires_grad = true})).requires_grad());
}

TEST(MetaDevice, FactoriesMakeMetadataOnly) {
  const TensorOptions meta{.dtype = kFloat64, .device = kMeta};
  for (const Tensor& t : {empty({2, 3}, meta), zeros({2, 3}, meta), ones({2, 3}, meta), full({2, 3}, 1.5, meta),
                          from_vector<double>({1, 2, 3, 4, 5, 6}, {2, 3}, meta)}) {
    EXPECT_TRUE(t.is_meta());
    EXPECT_EQ(t.sizes(), (Shape{2, 3}));
    EXPECT_EQ(t.dtype(), kFloat64);
    EXPECT_TRUE(t.impl()->storage()->is_fake());
    EXPECT_THROW_MSG(t.raw_data(), "[data_ptr]");
  }
  Tensor a = arange(0, 10, 2, meta);
  EXPECT_EQ(a.sizes(), (Shape{5}));
  EXPECT_TRUE(a.is_meta());
  EXPECT_EQ(empty_strided({2, 3}, {1, 2}, meta).strides(), (Shape{1, 2}));
  EXPECT_THROW_MSG(zeros({-1}, meta), "negative dimension");
}

TEST(FactoryCuda, ValuesMatchCpu) {
  TG_REQUIRE_CUDA();
  const Device dev = cuda_device();
  for (DType dt : {kBool, kInt32, kInt64, kFloat32, kFloat64}) {
    Tensor z = zeros({3, 5}, {.dtype = dt, .device = dev});
    EXPECT_TRUE(z.is_cuda());
    testing::expect_close(z, zeros({3, 5}, {.dtype = dt}));
    testing::expect_close(ones({7}, {.dtype = dt, .device = dev}), ones({7}, {.dtype = dt}));
    testing::expect_close(full({1025}, 3, {.dtype = dt, .device = dev}), full({1025}, 3, {.dtype = dt}));
    testing::expect_close(from_vector<double>({1, 0, 2.5}, {3}, {.dtype = dt, .device = dev}),
                          from_vector<double>({1, 0, 2.5}, {3}, {.dtype = dt}));
  }
  for (DType dt : {kInt32, kInt64, kFloat32, kFloat64}) {
    Tensor g = arange(-3, 1000, 0.7, {.dtype = dt, .device = dev});
    Tensor c = arange(-3, 1000, 0.7, {.dtype = dt});
    EXPECT_EQ(g.to_vector<double>(), c.to_vector<double>()) << dtype_name(dt);
    EXPECT_EQ(arange(5000, {.dtype = dt, .device = dev}).to_vector<double>(),
              arange(5000, {.dtype = dt}).to_vector<double>());
  }
  Tensor s = scalar_tensor(2.5, {.device = dev});
  EXPECT_TRUE(s.is_cuda());
  EXPECT_EQ(s.item<float>(), 2.5f);
  Tensor st = empty_strided({100, 3}, {1, 200}, {.device = dev});
  EXPECT_GE(st.impl()->storage()->nbytes(), (99 + 2 * 200 + 1) * 4);
  EXPECT_EQ(zeros({0}, {.device = dev}).numel(), 0);
}

}  // namespace
}  // namespace tg
