// Reductions (sum, mean, amax, amin, argmax, var, sum_to): values against a host reference for every
// dims/keepdim combination and dtype, strided inputs, ties, NaNs, empty tensors, errors, first and
// second derivatives, meta shapes, and CPU-vs-CUDA agreement on small and large inputs.
#include <cmath>
#include <functional>
#include <limits>
#include <vector>

#include "support/test_support.h"
#include "support/values.h"

namespace tg {
namespace {

using testing::make;
using testing::expect_values;
using testing::kNaN;
using testing::expect_close;
using testing::expect_cuda_matches_cpu;
using testing::expect_gradcheck;
using testing::expect_gradgradcheck;
using testing::random_tensor;

const double kInf = std::numeric_limits<double>::infinity();

// ---- a host reference --------------------------------------------------------------------------

enum class Kind { Sum, Mean, Max, Min, Var0, Var1 };

// Reduces row-major `data` of `sizes` over the dims flagged in `mask`, in plain double loops.
std::vector<double> reference(const std::vector<double>& data, const Shape& sizes, const std::vector<bool>& mask,
                              Kind kind) {
  Shape out_sizes;
  for (size_t i = 0; i < sizes.size(); ++i)
    if (!mask[i]) out_sizes.push_back(sizes[i]);
  const int64_t n_out = shape_numel(out_sizes);
  std::vector<std::vector<double>> groups(static_cast<size_t>(n_out));
  const Shape strides = contiguous_strides(sizes);
  for (int64_t i = 0; i < shape_numel(sizes); ++i) {
    int64_t o = 0;
    for (size_t d = 0; d < sizes.size(); ++d) {
      if (mask[d]) continue;
      o = o * sizes[d] + (i / strides[d]) % sizes[d];
    }
    groups[static_cast<size_t>(o)].push_back(data[static_cast<size_t>(i)]);
  }
  std::vector<double> out;
  for (const auto& g : groups) {
    double s = 0, m = kind == Kind::Max ? -kInf : kInf;
    for (double v : g) {
      s += v;
      m = kind == Kind::Max ? std::max(m, v) : std::min(m, v);
    }
    const double n = static_cast<double>(g.size());
    double sq = 0;
    for (double v : g) sq += (v - s / n) * (v - s / n);
    switch (kind) {
      case Kind::Sum: out.push_back(s); break;
      case Kind::Mean: out.push_back(s / n); break;
      case Kind::Max:
      case Kind::Min: out.push_back(m); break;
      case Kind::Var0: out.push_back(sq / n); break;
      case Kind::Var1: out.push_back(sq / std::max(0.0, n - 1)); break;
    }
  }
  return out;
}

Tensor apply(Kind kind, const Tensor& x, const Shape& dims, bool keepdim) {
  switch (kind) {
    case Kind::Sum: return sum(x, dims, keepdim);
    case Kind::Mean: return mean(x, dims, keepdim);
    case Kind::Max: return amax(x, dims, keepdim);
    case Kind::Min: return amin(x, dims, keepdim);
    case Kind::Var0: return var(x, dims, 0, keepdim);
    case Kind::Var1: return var(x, dims, 1, keepdim);
  }
  return {};
}

// Every subset of the dims of a 3-D tensor (the empty list meaning all dims).
std::vector<Shape> all_dim_lists() {
  std::vector<Shape> lists;
  for (int bits = 0; bits < 8; ++bits) {
    Shape dims;
    for (int d = 0; d < 3; ++d)
      if (bits & (1 << d)) dims.push_back(d);
    lists.push_back(dims);
  }
  lists.push_back({-1, 0});  // negative and unordered
  return lists;
}

// Checks `kind` over every dims list and keepdim on x (any layout) against the reference.
void check_against_reference(Kind kind, const Tensor& x, double tol) {
  const std::vector<double> data = x.to_vector<double>();  // row-major, whatever the strides
  for (const Shape& dims : all_dim_lists()) {
    for (bool keepdim : {false, true}) {
      SCOPED_TRACE("dims " + shape_str(dims) + (keepdim ? " keepdim" : ""));
      std::vector<bool> mask(3, dims.empty());
      for (int64_t d : dims) mask[static_cast<size_t>((d + 3) % 3)] = true;
      const Tensor r = apply(kind, x, dims, keepdim);
      Shape expected_sizes;
      for (size_t d = 0; d < 3; ++d) {
        if (!mask[d]) expected_sizes.push_back(x.sizes()[d]);
        else if (keepdim) expected_sizes.push_back(1);
      }
      EXPECT_EQ(r.sizes(), expected_sizes);
      expect_values(r, reference(data, x.sizes(), mask, kind), tol);
    }
  }
}

// ---- values ------------------------------------------------------------------------------------

TEST(ReduceValues, EveryKindDimsKeepdimAndFloatDtype) {
  for (DType d : {kFloat32, kFloat64}) {
    SCOPED_TRACE(dtype_name(d));
    const Tensor x = random_tensor({3, 4, 5}, d, false, -2, 2);
    for (Kind k : {Kind::Sum, Kind::Mean, Kind::Max, Kind::Min, Kind::Var0, Kind::Var1}) {
      SCOPED_TRACE(static_cast<int>(k));
      check_against_reference(k, x, d == kFloat32 ? 1e-5 : 1e-12);
    }
  }
}

TEST(ReduceValues, IntegerAndBoolInputs) {
  const Tensor xi = arange(24).reshape({2, 3, 4}) - 7;
  for (DType d : {kInt32, kInt64}) {
    const Tensor x = xi.to(d);
    for (Kind k : {Kind::Sum, Kind::Max, Kind::Min}) check_against_reference(k, x, 0);
    EXPECT_EQ(sum(x).dtype(), kInt64);
    EXPECT_EQ(amax(x, {0}).dtype(), d);
  }
  const Tensor b = make({1, 0, 1, 1, 0, 0}, kBool, {2, 3});
  const Tensor s = sum(b, {1});
  EXPECT_EQ(s.dtype(), kInt64);
  expect_values(s, {2, 1});
  EXPECT_EQ(amax(b, {1}).dtype(), kBool);
  expect_values(amax(b, {1}), {1, 1});
  expect_values(amin(b, {0}), {1, 0, 0});
}

TEST(ReduceValues, SumDtypeOption) {
  const Tensor x = make({1.5, 2.25, 3.125}, kFloat32);
  const Tensor s = sum(x, {}, false, kFloat64);
  EXPECT_EQ(s.dtype(), kFloat64);
  EXPECT_DOUBLE_EQ(s.item<double>(), 6.875);
  EXPECT_EQ(x.sum(kFloat64).dtype(), kFloat64);
  const Tensor i = arange(5).to(kInt32);
  EXPECT_EQ(sum(i, {0}, false, kInt32).dtype(), kInt32);
  EXPECT_EQ(sum(i, {0}, false, kFloat32).item<float>(), 10.0f);
  EXPECT_THROW_MSG(sum(i, {}, false, kBool), "[sum] dtype bool");
}

TEST(ReduceValues, TensorMethodsForward) {
  const Tensor x = make({1, 2, 3, 4, 5, 6}, kFloat64, {2, 3});
  EXPECT_DOUBLE_EQ(x.sum().item<double>(), 21);
  expect_values(x.sum({1}), {6, 15});
  expect_values(x.sum({0}, true), {5, 7, 9});
  EXPECT_EQ(x.sum({0}, true).sizes(), (Shape{1, 3}));
  EXPECT_DOUBLE_EQ(x.mean().item<double>(), 3.5);
  expect_values(x.mean({-1}, true), {2, 5});
  expect_values(x.amax({0}), {4, 5, 6});
  expect_values(x.amin({1}), {1, 4});
  EXPECT_EQ(x.argmax().item<int64_t>(), 5);
  expect_values(x.argmax(0), {1, 1, 1});
  expect_values(x.var({1}), {1, 1});
  expect_values(x.var({1}, 0), {2.0 / 3, 2.0 / 3});
}

TEST(ReduceValues, ZeroDimInputs) {
  const Tensor s = scalar_tensor(2.5, {.dtype = kFloat64});
  EXPECT_DOUBLE_EQ(sum(s).item<double>(), 2.5);
  EXPECT_DOUBLE_EQ(sum(s, {0}).item<double>(), 2.5);
  EXPECT_EQ(sum(s, {-1}, true).dim(), 0);
  EXPECT_DOUBLE_EQ(amax(s).item<double>(), 2.5);
  EXPECT_DOUBLE_EQ(mean(s).item<double>(), 2.5);
  EXPECT_EQ(argmax(s).item<int64_t>(), 0);
  EXPECT_EQ(argmax(s, 0).item<int64_t>(), 0);
  EXPECT_TRUE(std::isnan(var(s).item<double>()));
  EXPECT_DOUBLE_EQ(var(s, {}, 0).item<double>(), 0);
}

TEST(ReduceValues, StridedInputsMatchContiguous) {
  const Tensor base = random_tensor({4, 5, 6}, kFloat64);
  const std::vector<std::pair<std::string, Tensor>> layouts = {
      {"permuted", base.permute({2, 0, 1})},
      {"transposed", base.transpose(0, 2)},
      {"sliced", base.slice(1, 1, 5, 2).slice(2, 0, 5)},
      {"expanded", base.select(1, 2).unsqueeze(1).expand({4, 3, 6})},
      {"offset", base.narrow(0, 1, 3)},
  };
  for (const auto& [name, x] : layouts) {
    SCOPED_TRACE(name);
    for (Kind k : {Kind::Sum, Kind::Mean, Kind::Max, Kind::Min, Kind::Var1}) check_against_reference(k, x, 1e-12);
    expect_values(argmax(x), {static_cast<double>(argmax(x.contiguous()).item<int64_t>())});
    for (int64_t d = 0; d < 3; ++d) {
      EXPECT_TRUE(equal(argmax(x, d), argmax(x.contiguous(), d)));
    }
  }
}

TEST(ReduceValues, LargeSumsAreAccurate) {
  const Tensor ones32 = ones({1 << 20});
  EXPECT_EQ(sum(ones32).item<float>(), 1048576.0f);
  EXPECT_EQ(sum(ones({1000000})).item<float>(), 1000000.0f);
  // 2^24 + 1 ones: a running float32 total would stop growing at 2^24.
  EXPECT_EQ(sum(ones({(1 << 24) + 8})).item<float>(), 16777224.0f);
  const Tensor r = random_tensor({1 << 20}, kFloat32, false, 0, 1);
  const double exact = sum(r.to(kFloat64)).item<double>();
  EXPECT_NEAR(sum(r).item<float>(), exact, exact * 1e-6);
  EXPECT_NEAR(mean(r).item<float>(), exact / (1 << 20), 1e-6);
  // Down the columns (outputs adjacent in memory) as well as along rows.
  const Tensor m = random_tensor({4096, 300}, kFloat32, false, 0, 1);
  expect_close(sum(m, {0}), sum(m.to(kFloat64), {0}), 1e-5, 1e-4);
  expect_close(sum(m, {1}), sum(m.to(kFloat64), {1}), 1e-5, 1e-4);
}

TEST(ReduceValues, TiesAndNaNs) {
  const Tensor x = make({1, 3, 3, 2, 3});
  EXPECT_EQ(argmax(x).item<int64_t>(), 1);
  const Tensor m = make({5, 1, 5, 7, 7, 2}, kFloat32, {2, 3});
  expect_values(argmax(m, 1), {0, 0});
  expect_values(argmax(m, 0), {1, 1, 0});
  expect_values(argmax(m, 1, true), {0, 0});
  EXPECT_EQ(argmax(m, 1, true).sizes(), (Shape{2, 1}));
  EXPECT_EQ(argmax(m, {}, true).sizes(), (Shape{1, 1}));
  EXPECT_EQ(argmax(m).dtype(), kInt64);
  const Tensor n = make({1, kNaN, 4, kNaN});
  EXPECT_EQ(argmax(n).item<int64_t>(), 1);
  EXPECT_TRUE(std::isnan(amax(n).item<double>()));
  EXPECT_TRUE(std::isnan(amin(n).item<double>()));
  EXPECT_TRUE(std::isnan(sum(n).item<double>()));
  expect_values(amax(make({-kInf, -kInf})), {-kInf});
  expect_values(amin(make({kInf, 2})), {2});
  expect_values(argmax(make({-kInf, -kInf})), {0});
  expect_values(argmax(make({-5, -3, -3}, kInt32)), {1});
}

TEST(ReduceValues, EmptyTensors) {
  const Tensor e = empty({0});
  EXPECT_EQ(sum(e).item<float>(), 0.0f);
  EXPECT_EQ(sum(empty({0}, {.dtype = kInt32})).item<int64_t>(), 0);
  EXPECT_TRUE(std::isnan(mean(e).item<float>()));
  const Tensor z = zeros({0, 3});
  expect_values(sum(z, {0}), {0, 0, 0});
  EXPECT_EQ(sum(z, {1}).sizes(), (Shape{0}));
  EXPECT_EQ(amax(z, {1}).sizes(), (Shape{0}));
  EXPECT_EQ(argmax(z, 1).sizes(), (Shape{0}));
  expect_values(mean(z, {0}), {kNaN, kNaN, kNaN});
  expect_values(var(z, {0}), {kNaN, kNaN, kNaN});
  EXPECT_THROW_MSG(amax(e), "[amax] expected reduction dim 0 to have non-zero size");
  EXPECT_THROW_MSG(amin(z, {0}), "[amin] expected reduction dim 0 to have non-zero size");
  EXPECT_THROW_MSG(amax(z), "non-zero size");
  EXPECT_THROW_MSG(argmax(z), "[argmax] expected reduction dim to be specified for input.numel() == 0");
  EXPECT_THROW_MSG(argmax(z, 0), "[argmax] expected reduction dim 0 to have non-zero size");
}

TEST(ReduceErrors, DimsAndDtypes) {
  const Tensor x = zeros({2, 3});
  EXPECT_THROW_MSG(sum(x, {2}), "[sum] dimension out of range (expected to be in range of [-2, 1], but got 2)");
  EXPECT_THROW_MSG(sum(x, {1, -1}), "[sum] dim 1 appears multiple times in the list of dims");
  EXPECT_THROW_MSG(mean(x, {0, 0}), "[mean] dim 0 appears multiple times");
  EXPECT_THROW_MSG(amax(x, {-3}), "[amax] dimension out of range");
  EXPECT_THROW_MSG(var(x, {5}), "[var] dimension out of range");
  EXPECT_THROW_MSG(argmax(x, 2), "[argmax] dimension out of range");
  const Tensor i = zeros({2, 3}, {.dtype = kInt64});
  EXPECT_THROW_MSG(mean(i), "[mean] could not infer output dtype: input dtype must be floating point");
  EXPECT_THROW_MSG(var(i), "[var] std and var only support floating point dtypes");
  EXPECT_THROW_MSG(argmax(zeros({2}, {.dtype = kBool})), "[argmax] expected a numeric tensor, got bool");
}

// ---- sum_to ------------------------------------------------------------------------------------

TEST(SumTo, ReducesBroadcastDims) {
  const Tensor x = arange(24).reshape({2, 3, 4}).to(kFloat64);
  expect_values(sum_to(x, {3, 1}), {60, 92, 124});
  EXPECT_EQ(sum_to(x, {3, 1}).sizes(), (Shape{3, 1}));
  expect_values(sum_to(x, {4}), {60, 66, 72, 78});
  expect_values(sum_to(x, {1, 1, 1}), {276});
  EXPECT_EQ(sum_to(x, {}).dim(), 0);
  expect_values(sum_to(x, {}), {276});
  expect_values(sum_to(x.transpose(0, 2), {4, 1, 1}), {60, 66, 72, 78});
}

TEST(SumTo, NothingToReduceIsFree) {
  const Tensor x = random_tensor({2, 3});
  EXPECT_TRUE(sum_to(x, {2, 3}).is_same(x));
  // Only size-1 dims go away: a view of the same storage, no kernel.
  const Tensor y = random_tensor({1, 2, 1, 3});
  const Tensor r = sum_to(y, {2, 1, 3});
  EXPECT_EQ(r.sizes(), (Shape{2, 1, 3}));
  EXPECT_EQ(r.impl()->storage(), y.impl()->storage());
  EXPECT_TRUE(equal(r.reshape({6}), y.reshape({6})));
}

TEST(SumTo, Errors) {
  const Tensor x = zeros({2, 3});
  EXPECT_THROW_MSG(sum_to(x, {4}), "[sum_to_size] size [4] is not expandable to size [2, 3]");
  EXPECT_THROW_MSG(sum_to(x, {1, 2, 3}), "not expandable");
  EXPECT_THROW_MSG(sum_to(x, {2, 2}), "not expandable");
}

// ---- gradients ---------------------------------------------------------------------------------

using L = const TensorList&;

TEST(ReduceGrad, SumAndMean) {
  const Tensor x = random_tensor({2, 3, 4}, kFloat64, true);
  expect_gradcheck([](L v) { return sum(v[0]); }, {x});
  expect_gradcheck([](L v) { return sum(v[0], {0, 2}); }, {x});
  expect_gradcheck([](L v) { return sum(v[0], {-1}, true); }, {x});
  expect_gradcheck([](L v) { return mean(v[0], {1}); }, {x});
  expect_gradcheck([](L v) { return mean(v[0], {0, 1, 2}, true); }, {x});
  expect_gradcheck([](L v) { return sum_to(v[0], {3, 1}); }, {x});
  expect_gradcheck([](L v) { return sum(v[0].transpose(0, 2), {0}); }, {x});
  // Second order through a product (the reductions themselves are linear).
  expect_gradgradcheck([](L v) { return sum(v[0] * v[0], {1}); }, {x});
  expect_gradgradcheck([](L v) { return mean(v[0] * v[0], {0, 2}, true); }, {x});
  expect_gradgradcheck([](L v) { return sum_to(v[0] * v[0], {4}); }, {x});
}

TEST(ReduceGrad, SumGradientIsExpandedOnes) {
  const Tensor x = random_tensor({2, 3}, kFloat64, true);
  sum(x, {1}).backward(make({1.5, -2}));
  expect_values(x.grad(), {1.5, 1.5, 1.5, -2, -2, -2});
  const Tensor y = random_tensor({4}, kFloat64, true);
  mean(y).backward();
  expect_values(y.grad(), {0.25, 0.25, 0.25, 0.25});
  const Tensor f = random_tensor({3}, kFloat32, true);
  const Tensor s = sum(f, {}, false, kFloat64);
  s.backward();
  EXPECT_EQ(f.grad().dtype(), kFloat32);
  expect_values(f.grad(), {1, 1, 1});
}

TEST(ReduceGrad, AmaxAmin) {
  const Tensor x = random_tensor({3, 4}, kFloat64, true);
  expect_gradcheck([](L v) { return amax(v[0]); }, {x});
  expect_gradcheck([](L v) { return amax(v[0], {1}); }, {x});
  expect_gradcheck([](L v) { return amin(v[0], {0}, true); }, {x});
  expect_gradgradcheck([](L v) { return amax(v[0] * v[0], {1}); }, {x});
  expect_gradgradcheck([](L v) { return amin(v[0] * v[0], {0}); }, {x});
}

TEST(ReduceGrad, AmaxTiesShareTheGradient) {
  Tensor x = make({1, 3, 3, 2});
  x.requires_grad_();
  amax(x).backward();
  expect_values(x.grad(), {0, 0.5, 0.5, 0});
  Tensor m = make({4, 4, 4, 1, 2, 1}, kFloat64, {2, 3});
  m.requires_grad_();
  amin(m, {1}).backward(make({3, 2}));
  expect_values(m.grad(), {1, 1, 1, 1, 0, 1});
}

TEST(ReduceGrad, Var) {
  const Tensor x = random_tensor({3, 4}, kFloat64, true);
  expect_gradcheck([](L v) { return var(v[0]); }, {x});
  expect_gradcheck([](L v) { return var(v[0], {1}, 0, true); }, {x});
  expect_gradcheck([](L v) { return var(v[0], {0}, 2); }, {x});
  expect_gradgradcheck([](L v) { return var(v[0], {1}); }, {x});
  expect_gradgradcheck([](L v) { return var(v[0]); }, {x});
}

TEST(ReduceGrad, ArgmaxIsNotDifferentiable) {
  const Tensor x = random_tensor({3, 4}, kFloat64, true);
  const Tensor a = argmax(x, 1);
  EXPECT_FALSE(a.requires_grad());
  EXPECT_EQ(a.dtype(), kInt64);
}

// ---- meta --------------------------------------------------------------------------------------

TEST(ReduceMeta, ShapesWithoutData) {
  const Tensor x = empty({2, 3, 4}, {.device = kMeta});
  EXPECT_EQ(sum(x, {1}).sizes(), (Shape{2, 4}));
  EXPECT_TRUE(sum(x, {1}).is_meta());
  EXPECT_EQ(sum(x, {0, 2}, true).sizes(), (Shape{1, 3, 1}));
  EXPECT_EQ(mean(x).sizes(), (Shape{}));
  EXPECT_EQ(amax(x, {-1}).sizes(), (Shape{2, 3}));
  EXPECT_EQ(amin(x, {0}, true).sizes(), (Shape{1, 3, 4}));
  EXPECT_EQ(argmax(x, 1).sizes(), (Shape{2, 4}));
  EXPECT_EQ(argmax(x, 1).dtype(), kInt64);
  EXPECT_EQ(argmax(x).sizes(), (Shape{}));
  EXPECT_EQ(var(x, {2}, 1, true).sizes(), (Shape{2, 3, 1}));
  EXPECT_EQ(sum_to(x, {3, 1}).sizes(), (Shape{3, 1}));
  EXPECT_EQ(sum(empty({2}, {.dtype = kInt32, .device = kMeta})).dtype(), kInt64);
  EXPECT_THROW_MSG(sum(x, {3}), "[sum] dimension out of range");
  EXPECT_THROW_MSG(amax(empty({0, 2}, {.device = kMeta}), {0}), "non-zero size");
}

// ---- CUDA --------------------------------------------------------------------------------------

// Compares every reduction of x on CPU and CUDA over `dims`.
void expect_all_kinds_match(const Tensor& x, const Shape& dims, double rtol) {
  SCOPED_TRACE("sizes " + shape_str(x.sizes()) + " dims " + shape_str(dims));
  const bool floating = is_floating(x.dtype());
  expect_cuda_matches_cpu([&](L v) { return sum(v[0], dims); }, {x}, rtol, 1e-4);
  expect_cuda_matches_cpu([&](L v) { return amax(v[0], dims, true); }, {x}, 0, 0);
  expect_cuda_matches_cpu([&](L v) { return amin(v[0], dims); }, {x}, 0, 0);
  if (floating) {
    expect_cuda_matches_cpu([&](L v) { return mean(v[0], dims, true); }, {x}, rtol, 1e-6);
    expect_cuda_matches_cpu([&](L v) { return var(v[0], dims); }, {x}, rtol * 10, 1e-6);
  }
  if (dims.size() <= 1) {
    const std::optional<int64_t> d = dims.empty() ? std::nullopt : std::optional<int64_t>(dims[0]);
    expect_cuda_matches_cpu([&](L v) { return argmax(v[0], d); }, {x}, 0, 0);
  }
}

TEST(ReduceCuda, SmallShapesEveryDimsList) {
  TG_REQUIRE_CUDA();
  for (DType d : {kFloat32, kFloat64, kInt32, kInt64}) {
    SCOPED_TRACE(dtype_name(d));
    const Tensor x = random_tensor({3, 4, 5}, kFloat64, false, -50, 50).to(d);
    for (const Shape& dims : all_dim_lists()) expect_all_kinds_match(x, dims, 1e-5);
  }
  const Tensor b = gt(random_tensor({7, 9}), 0.0);
  expect_cuda_matches_cpu([](L v) { return sum(v[0], {1}); }, {b});
  expect_cuda_matches_cpu([](L v) { return amax(v[0], {0}); }, {b});
}

TEST(ReduceCuda, LargeShapesEachDim) {
  TG_REQUIRE_CUDA();
  const Tensor flat = random_tensor({1 << 20}, kFloat32, false, -1, 1);
  expect_all_kinds_match(flat, {}, 1e-4);
  expect_all_kinds_match(flat.slice(0, 1, std::nullopt, 3), {}, 1e-4);  // one output, evenly strided
  const Tensor m = random_tensor({4096, 1000}, kFloat32, false, -1, 1);
  expect_all_kinds_match(m, {0}, 1e-4);
  expect_all_kinds_match(m, {1}, 1e-4);
  expect_all_kinds_match(m, {}, 1e-3);
  // Few long rows, many short rows, and long columns over few outputs.
  expect_all_kinds_match(random_tensor({3, 300000}, kFloat32), {1}, 1e-4);
  expect_all_kinds_match(random_tensor({200000, 3}, kFloat32), {1}, 1e-5);
  expect_all_kinds_match(random_tensor({300000, 3}, kFloat64), {0}, 1e-9);
  EXPECT_EQ(sum(ones({1 << 20}, {.device = cuda_device()})).item<float>(), 1048576.0f);
  EXPECT_EQ(sum(ones({4096, 1000}, {.device = cuda_device()}), {0}).amin().item<float>(), 4096.0f);
}

TEST(ReduceCuda, StridedInputs) {
  TG_REQUIRE_CUDA();
  const Tensor base = random_tensor({64, 48, 40}, kFloat64);
  for (const Tensor& x : {base.permute({2, 0, 1}), base.transpose(0, 1).slice(2, 1, 40, 3),
                          base.select(1, 3).unsqueeze(1).expand({64, 7, 40})}) {
    for (const Shape& dims : all_dim_lists()) expect_all_kinds_match(x, dims, 1e-9);
  }
  const Tensor t = random_tensor({1000, 4096}, kFloat32).t();
  expect_all_kinds_match(t, {0}, 1e-4);
  expect_all_kinds_match(t, {1}, 1e-4);
}

TEST(ReduceCuda, TiesNaNsEmptyAndSumTo) {
  TG_REQUIRE_CUDA();
  const Tensor ties = make({2, 7, 7, 1, 7, 7, 0, 7}, kFloat32, {2, 4});
  expect_cuda_matches_cpu([](L v) { return argmax(v[0], 1); }, {ties}, 0, 0);
  expect_cuda_matches_cpu([](L v) { return argmax(v[0]); }, {ties}, 0, 0);
  // Ties spread over many blocks: the first index must still win.
  const Tensor flat_ties = zeros({1 << 20});
  expect_cuda_matches_cpu([](L v) { return argmax(v[0]); }, {flat_ties}, 0, 0);
  const Tensor nans = make({1, kNaN, 3, kNaN, 5, 6}, kFloat64, {2, 3});
  expect_cuda_matches_cpu([](L v) { return amax(v[0], {1}); }, {nans});
  expect_cuda_matches_cpu([](L v) { return amin(v[0]); }, {nans});
  expect_cuda_matches_cpu([](L v) { return argmax(v[0], 1); }, {nans}, 0, 0);
  expect_cuda_matches_cpu([](L v) { return sum(v[0], {0}); }, {zeros({0, 5})});
  expect_cuda_matches_cpu([](L v) { return mean(v[0]); }, {zeros({0})});
  const Tensor x = random_tensor({8, 16, 32}, kFloat32);
  expect_cuda_matches_cpu([](L v) { return sum_to(v[0], {16, 1}); }, {x});
  expect_cuda_matches_cpu([](L v) { return sum_to(v[0], {32}); }, {x});
  expect_cuda_matches_cpu([](L v) { return sum(v[0], {}, false, kFloat64); }, {x});
  expect_cuda_matches_cpu([](L v) { return sum(v[0], {1}); }, {arange(60).reshape({3, 20}).to(kInt32)});
  // Column sums (bias gradients): 16-bit rows read as 16-byte vectors and cut into chunks of rows,
  // float64 pairs, and a start off the vector alignment (the one-column-per-thread kernel).
  const Tensor rows16 = random_tensor({3000, 768}, kFloat32).to(kBFloat16);
  expect_cuda_matches_cpu([](L v) { return sum(v[0], {0}); }, {rows16}, 1e-2, 1e-2);
  expect_cuda_matches_cpu([](L v) { return mean(v[0], {0}); }, {rows16.to(kFloat16)}, 1e-2, 1e-3);
  expect_cuda_matches_cpu([](L v) { return sum(v[0], {0}); }, {random_tensor({2000, 96}, kFloat64)}, 1e-9, 1e-9);
  const Tensor shifted = random_tensor({3000 * 64 + 1}, kFloat32).narrow(0, 1, 3000 * 64).view({3000, 64});
  expect_cuda_matches_cpu([](L v) { return sum(v[0], {0}); }, {shifted}, 1e-4, 1e-4);
}

TEST(ReduceCuda, GradientsMatchCpu) {
  TG_REQUIRE_CUDA();
  const Tensor x = random_tensor({16, 24}, kFloat64);
  auto grad_of = [](std::function<Tensor(const Tensor&)> f) {
    return [f](L v) {
      Tensor leaf = v[0].detach().requires_grad_();
      return grad({f(leaf).sum()}, {leaf})[0];
    };
  };
  expect_cuda_matches_cpu(grad_of([](const Tensor& t) { return amax(t, {1}) * 3.0; }), {x});
  expect_cuda_matches_cpu(grad_of([](const Tensor& t) { return var(t, {0}) * 2.0; }), {x});
  expect_cuda_matches_cpu(grad_of([](const Tensor& t) { return mean(t * t, {1}); }), {x});
}

}  // namespace
}  // namespace tg
