// Every differentiable op, one test each: gradcheck, gradgradcheck (where the gradient depends on the
// inputs), non-contiguous and float32 inputs on the CPU, and CUDA against CPU (float32, float64,
// non-contiguous inputs, and gradients).
#include <gtest/gtest.h>

#include <functional>
#include <set>
#include <string>

#include "support/op_cases.h"

namespace tg::testing {
namespace {

// Inputs drawn from a seed of their own, so a case does not depend on which cases ran before it.
TensorList seeded_inputs(const OpCase& c, bool requires_grad) {
  manual_seed(std::hash<std::string>{}(c.name));
  TensorList in = c.inputs();
  if (requires_grad)
    for (Tensor& t : in)
      if (t.is_floating_point()) t.requires_grad_(true);
  return in;
}

std::string case_name(const ::testing::TestParamInfo<OpCase>& info) { return info.param.name; }

std::vector<OpCase> cases_where(const std::function<bool(const OpCase&)>& keep) {
  std::vector<OpCase> out;
  for (OpCase& c : all_op_cases())
    if (keep(c)) out.push_back(std::move(c));
  return out;
}

// The same values laid out every other element along the last dim (strided, not contiguous).
Tensor noncontiguous(const Tensor& x) {
  if (x.dim() == 0 || x.numel() == 0) return x;
  Shape big = x.sizes();
  big.back() *= 2;
  Tensor storage = zeros(big, {.dtype = x.dtype(), .device = x.device()});
  Tensor v = storage.slice(-1, 0, std::nullopt, 2);
  v.copy_(x);
  return v;
}

TensorFn on_noncontiguous(const TensorFn& fn) {
  return [fn](const TensorList& xs) {
    TensorList strided;
    for (const Tensor& x : xs) strided.push_back(noncontiguous(x));
    for (const Tensor& s : strided)
      if (s.dim() > 0 && s.size(-1) > 1) EXPECT_FALSE(s.is_contiguous());
    return fn(strided);
  };
}

// Gradients of a fixed projection of fn's output w.r.t. its floating inputs, flattened into one vector.
TensorFn gradients_of(const TensorFn& fn) {
  return [fn](const TensorList& xs) {
    TensorList leaves, wrt;
    for (const Tensor& x : xs) {
      if (!x.is_floating_point()) {
        leaves.push_back(x);
        continue;
      }
      leaves.push_back(x.detach().clone().requires_grad_(true));
      wrt.push_back(leaves.back());
    }
    Tensor out = fn(leaves);
    Tensor w = sin(arange(0.0, static_cast<double>(out.numel()), 1.0, {.dtype = kFloat64, .device = out.device()}) *
                   0.7) + 1.5;
    Tensor loss = (out.to(kFloat64) * w.reshape(out.sizes())).sum();
    TensorList grads = grad({loss}, wrt, {}, false, false, /*allow_unused=*/true);
    TensorList flat;
    for (size_t i = 0; i < grads.size(); ++i)
      flat.push_back(grads[i].defined() ? grads[i].reshape({-1}) : zeros_like(wrt[i]).reshape({-1}));
    return cat(flat);
  };
}

TensorList as_float32(const TensorList& in) {
  TensorList out;
  for (const Tensor& t : in) out.push_back(t.dtype() == kFloat64 ? t.to(kFloat32) : t);
  return out;
}

class OpGradcheck : public ::testing::TestWithParam<OpCase> {};

TEST_P(OpGradcheck, MatchesFiniteDifferences) {
  const OpCase& c = GetParam();
  expect_gradcheck(c.fn, seeded_inputs(c, true), c.eps, c.atol);
}

INSTANTIATE_TEST_SUITE_P(Ops, OpGradcheck, ::testing::ValuesIn(all_op_cases()), case_name);

class OpGradgradcheck : public ::testing::TestWithParam<OpCase> {};

TEST_P(OpGradgradcheck, SecondDerivativesMatchFiniteDifferences) {
  const OpCase& c = GetParam();
  expect_gradgradcheck(c.fn, seeded_inputs(c, true), c.eps, c.atol);
}

INSTANTIATE_TEST_SUITE_P(Ops, OpGradgradcheck,
                         ::testing::ValuesIn(cases_where([](const OpCase& c) { return c.twice; })), case_name);

// Strided inputs take the kernels' non-contiguous paths; values and gradients must not change.
class OpStrided : public ::testing::TestWithParam<OpCase> {};

TEST_P(OpStrided, NonContiguousInputsGiveTheSameResults) {
  const OpCase& c = GetParam();
  const TensorList in = seeded_inputs(c, false);
  expect_close(on_noncontiguous(c.fn)(in), c.fn(in), 1e-12, 1e-14);
  expect_close(gradients_of(on_noncontiguous(c.fn))(in), gradients_of(c.fn)(in), 1e-12, 1e-14);
}

INSTANTIATE_TEST_SUITE_P(Ops, OpStrided,
                         ::testing::ValuesIn(cases_where([](const OpCase& c) { return !c.absolute_geometry; })),
                         case_name);

// float32 kernels agree with float64 ones to float32 precision, and keep the dtype.
class OpFloat32 : public ::testing::TestWithParam<OpCase> {};

TEST_P(OpFloat32, AgreesWithFloat64) {
  const OpCase& c = GetParam();
  const TensorList in = seeded_inputs(c, false);
  const Tensor single = c.fn(as_float32(in));
  if (!c.converts_dtype) EXPECT_EQ(single.dtype(), kFloat32);
  expect_close(single, c.fn(in), 1e-4, 1e-5);
  expect_close(gradients_of(c.fn)(as_float32(in)), gradients_of(c.fn)(in), 1e-4, 1e-5);
}

INSTANTIATE_TEST_SUITE_P(Ops, OpFloat32, ::testing::ValuesIn(all_op_cases()), case_name);

class OpCuda : public ::testing::TestWithParam<OpCase> {};

TEST_P(OpCuda, MatchesCpu) {
  TG_REQUIRE_CUDA();
  const OpCase& c = GetParam();
  const TensorList in = seeded_inputs(c, false);
  {
    SCOPED_TRACE("float64");
    expect_cuda_matches_cpu(c.fn, in, 1e-9, 1e-12);
  }
  {
    SCOPED_TRACE("float32");
    expect_cuda_matches_cpu(c.fn, as_float32(in), 1e-4, 1e-5);
  }
  {
    SCOPED_TRACE("float64, non-contiguous inputs");
    expect_cuda_matches_cpu(on_noncontiguous(c.fn), in, 1e-9, 1e-12);
  }
  {
    SCOPED_TRACE("float64 gradients");
    expect_cuda_matches_cpu(gradients_of(c.fn), in, 1e-9, 1e-12);
  }
  {
    SCOPED_TRACE("float64 gradients, non-contiguous inputs");
    expect_cuda_matches_cpu(gradients_of(on_noncontiguous(c.fn)), in, 1e-9, 1e-12);
  }
}

INSTANTIATE_TEST_SUITE_P(Ops, OpCuda, ::testing::ValuesIn(all_op_cases()), case_name);

// Device transfers are differentiable: gradients come back to the CPU leaf in its dtype.
TEST(CrossDevice, GradientsFlowThroughTransfers) {
  TG_REQUIRE_CUDA();
  Tensor x = random_tensor({2, 3}, kFloat64, true);
  Tensor y = x.cuda();
  ASSERT_TRUE(y.is_cuda());
  (y * y).sum().backward();
  ASSERT_TRUE(x.grad().is_cpu());
  expect_close(x.grad(), 2.0 * x.detach());

  Tensor w = random_tensor({3}, kFloat64, true);
  expect_gradcheck([](const TensorList& in) { return sin(in[0].cuda() * in[1].cuda()).cpu(); }, {x, w});
  expect_gradcheck([](const TensorList& in) { return in[0].to(cuda_device(), kFloat32).to(kCPU, kFloat64); }, {x},
                   1e-2, 1e-5);
  expect_gradcheck(
      [](const TensorList& in) {
        Tensor d = zeros({2, 3}, {.dtype = kFloat64, .device = cuda_device()});
        d.copy_(in[0]);
        return (d * 3.0).cpu();
      },
      {x});
}

TEST(OpCases, NamesAreUniqueAndInputsAreFloat64) {
  std::set<std::string> names;
  for (const OpCase& c : all_op_cases()) {
    EXPECT_TRUE(names.insert(c.name).second) << "duplicate case " << c.name;
    bool any_float = false;
    for (const Tensor& t : seeded_inputs(c, false)) {
      EXPECT_TRUE(t.is_cpu()) << c.name;
      if (t.is_floating_point()) {
        EXPECT_EQ(t.dtype(), kFloat64) << c.name;
        any_float = true;
      }
    }
    EXPECT_TRUE(any_float) << c.name << " has nothing to differentiate";
  }
}

}  // namespace
}  // namespace tg::testing
