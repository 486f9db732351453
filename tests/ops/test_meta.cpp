// Meta tensors: every op infers sizes, strides and dtype without data or kernels, backward runs on
// them too, shape errors surface, and reading values is a clear error.
#include <gtest/gtest.h>

#include "support/op_cases.h"

namespace tg::testing {
namespace {

Tensor to_meta_like(const Tensor& x) {
  return empty_strided(x.sizes(), x.strides(), {.dtype = x.dtype(), .device = kMeta});
}

TensorList meta_inputs(const TensorList& cpu) {
  TensorList out;
  for (const Tensor& t : cpu) out.push_back(to_meta_like(t));
  return out;
}

TensorList seeded_inputs(const OpCase& c) {
  manual_seed(std::hash<std::string>{}(c.name));
  return c.inputs();
}

void expect_no_data(const Tensor& t, const std::string& what) {
  EXPECT_TRUE(t.is_meta()) << what << " is on " << t.device().str();
  EXPECT_THROW_MSG(t.raw_data(), "meta");
}

std::string case_name(const ::testing::TestParamInfo<OpCase>& info) { return info.param.name; }

class MetaOp : public ::testing::TestWithParam<OpCase> {};

TEST_P(MetaOp, InfersTheSameGeometryAsTheCpu) {
  const OpCase& c = GetParam();
  const TensorList cpu_in = seeded_inputs(c);
  const Tensor expected = c.fn(cpu_in);
  const Tensor out = c.fn(meta_inputs(cpu_in));
  EXPECT_EQ(out.sizes(), expected.sizes());
  EXPECT_EQ(out.strides(), expected.strides());
  EXPECT_EQ(out.dtype(), expected.dtype());
  expect_no_data(out, "the output");
}

TEST_P(MetaOp, BackwardRunsOnMetaTensors) {
  const OpCase& c = GetParam();
  auto grads_of = [&](const TensorList& in) {
    TensorList leaves, wrt;
    for (const Tensor& t : in) {
      leaves.push_back(t.is_floating_point() ? t.detach().requires_grad_(true) : t);
      if (t.is_floating_point()) wrt.push_back(leaves.back());
    }
    Tensor out = c.fn(leaves);
    return grad({out}, wrt, {ones_like(out)}, false, false, /*allow_unused=*/true);
  };
  const TensorList cpu_in = seeded_inputs(c);
  const TensorList expected = grads_of(cpu_in);
  const TensorList got = grads_of(meta_inputs(cpu_in));
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i].defined(), expected[i].defined()) << "gradient " << i;
    if (!got[i].defined()) continue;
    EXPECT_EQ(got[i].sizes(), expected[i].sizes()) << "gradient " << i;
    EXPECT_EQ(got[i].dtype(), expected[i].dtype()) << "gradient " << i;
    expect_no_data(got[i], "gradient " + std::to_string(i));
  }
}

INSTANTIATE_TEST_SUITE_P(Ops, MetaOp, ::testing::ValuesIn(all_op_cases()), case_name);

TEST(Meta, FactoriesMakeMetaTensors) {
  const TensorOptions meta{.dtype = kFloat32, .device = kMeta};
  for (const Tensor& t : {empty({2, 3}, meta), zeros({2, 3}, meta), ones({2, 3}, meta), full({2, 3}, 7.0, meta),
                          rand({2, 3}, meta), randn({2, 3}, meta)}) {
    EXPECT_EQ(t.sizes(), (Shape{2, 3}));
    EXPECT_EQ(t.dtype(), kFloat32);
    expect_no_data(t, "factory output");
  }
  Tensor r = arange(5, {.dtype = kInt64, .device = kMeta});
  EXPECT_EQ(r.sizes(), (Shape{5}));
  EXPECT_EQ(r.dtype(), kInt64);
  expect_no_data(r, "arange");
  Tensor ri = randint(0, 10, {4}, {.dtype = kInt64, .device = kMeta});
  EXPECT_EQ(ri.sizes(), (Shape{4}));
  expect_no_data(ri, "randint");
  Tensor s = empty_strided({2, 3}, {1, 2}, {.dtype = kFloat64, .device = kMeta});
  EXPECT_EQ(s.strides(), (Shape{1, 2}));
  EXPECT_FALSE(s.is_contiguous());
  Tensor x = empty({3, 4}, {.dtype = kFloat64, .device = kMeta});
  for (const Tensor& t : {zeros_like(x), ones_like(x), full_like(x, 2.0), empty_like(x), rand_like(x)}) {
    EXPECT_EQ(t.sizes(), x.sizes());
    EXPECT_EQ(t.dtype(), kFloat64);
    expect_no_data(t, "_like factory output");
  }
}

TEST(Meta, ReadingValuesIsAClearError) {
  Tensor x = ones({2, 3}, {.device = kMeta});
  EXPECT_THROW_MSG(x.data_ptr<float>(), "meta tensor");
  EXPECT_THROW_MSG(x.raw_data(), "meta");
  Tensor one = ones({}, {.device = kMeta});
  EXPECT_THROW_MSG(one.item<float>(), "meta");
  EXPECT_THROW(x.to_vector<float>(), Error);
  EXPECT_THROW(x.cpu(), Error);
}

TEST(Meta, ConversionsKeepTheDeviceAndChangeTheDtype) {
  Tensor x = empty({2, 3}, {.dtype = kFloat32, .device = kMeta});
  Tensor d = x.to(kFloat64);
  EXPECT_EQ(d.dtype(), kFloat64);
  expect_no_data(d, "to(float64)");
  Tensor i = x.to(kInt32);
  EXPECT_EQ(i.dtype(), kInt32);
  expect_no_data(i, "to(int32)");
}

TEST(Meta, ToMetaKeepsGeometryAndDropsData) {
  Tensor x = random_tensor({3, 4}).t();
  Tensor m = x.to(kMeta);
  EXPECT_EQ(m.sizes(), x.sizes());
  EXPECT_EQ(m.dtype(), x.dtype());
  expect_no_data(m, "to(meta)");
}

TEST(Meta, InPlaceOpsBumpTheVersionWithoutData) {
  Tensor x = zeros({2, 3}, {.dtype = kFloat64, .device = kMeta});
  const uint64_t v0 = x.version();
  x.add_(1.0);
  x.mul_(ones({3}, {.dtype = kFloat64, .device = kMeta}));
  x.copy_(empty({2, 3}, {.dtype = kFloat32, .device = kMeta}));
  x.fill_(3.0);
  EXPECT_EQ(x.version(), v0 + 4);
  EXPECT_EQ(x.sizes(), (Shape{2, 3}));
  expect_no_data(x, "the written tensor");
}

TEST(Meta, ViewsShareTheMetaStorage) {
  Tensor x = empty({4, 6}, {.device = kMeta});
  Tensor v = x.narrow(1, 2, 3).t();
  EXPECT_EQ(v.sizes(), (Shape{3, 4}));
  EXPECT_EQ(v.strides(), (Shape{1, 6}));
  EXPECT_EQ(v.storage_offset(), 2);
  EXPECT_EQ(v.impl()->storage(), x.impl()->storage());
  v.mul_(2.0);
  EXPECT_EQ(x.version(), v.version());
}

TEST(Meta, ZeroElementTensorsWork) {
  Tensor x = empty({0, 3}, {.device = kMeta});
  Tensor y = x * 2.0 + 1.0;
  EXPECT_EQ(y.sizes(), (Shape{0, 3}));
  EXPECT_EQ(sum(x, {0}).sizes(), (Shape{3}));
}

TEST(Meta, ShapeErrorsSurface) {
  const TensorOptions meta{.dtype = kFloat32, .device = kMeta};
  Tensor a = empty({2, 3}, meta);
  Tensor b = empty({4}, meta);
  EXPECT_THROW_MSG(add(a, b), "[add] shapes [2, 3] and [4] cannot broadcast");
  EXPECT_THROW_MSG(mul(a, b), "cannot broadcast");
  EXPECT_THROW_MSG(mm(a, empty({4, 5}, meta)), "[mm]");
  EXPECT_THROW_MSG(bmm(empty({2, 2, 3}, meta), empty({3, 3, 2}, meta)), "[bmm]");
  EXPECT_THROW_MSG(matmul(a, empty({2, 3}, meta)), "[matmul]");
  EXPECT_THROW_MSG(linear(a, empty({5, 4}, meta)), "[");
  EXPECT_THROW_MSG(cat({a, empty({2, 4}, meta)}, 0), "[cat]");
  EXPECT_THROW_MSG(stack({a, empty({3, 2}, meta)}), "[stack]");
  EXPECT_THROW_MSG(view(a, {4, 2}), "[view]");
  EXPECT_THROW_MSG(a.t().view({6}), "[view]");
  EXPECT_THROW_MSG(select(a, 0, 5), "[select]");
  EXPECT_THROW_MSG(softmax(a, 2), "dimension out of range");
  EXPECT_THROW_MSG(sum(a, {3}), "dimension out of range");
  EXPECT_THROW_MSG(expand(a, {3, 3}), "[expand]");
  EXPECT_THROW_MSG(permute(a, {0}), "[permute]");
  EXPECT_THROW_MSG(index_select(a, 0, empty({2}, meta)), "[index_select]");
  EXPECT_THROW_MSG(nll_loss(a, empty({3}, {.dtype = kInt64, .device = kMeta})), "[nll_loss]");
  EXPECT_THROW_MSG(a.add_(empty({3, 3}, meta)), "[add");
  EXPECT_THROW_MSG(where(a, a, a), "[where]");
}

TEST(Meta, MixingMetaAndCpuOperandsIsAnError) {
  Tensor a = empty({2, 3}, {.device = kMeta});
  Tensor c = ones({2, 3});
  EXPECT_THROW_MSG(add(a, c), "expected all tensors to be on the same device");
}

}  // namespace
}  // namespace tg::testing
