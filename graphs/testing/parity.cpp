#include "graphs/testing/parity.h"

#include <gtest/gtest.h>

#include <cmath>

#include "autograd/engine.h"
#include "autograd/grad_mode.h"
#include "ops/factory.h"

namespace tg::testing {
namespace {

// Copies of the inputs with the same strides and flags; repeated inputs stay repeated.
TensorList copy_inputs(const TensorList& inputs) {
  TensorList out;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& x = inputs[i];
    size_t same = i;
    for (size_t j = 0; j < i; ++j)
      if (inputs[j].is_same(x)) same = j;
    if (same != i) {
      out.push_back(out[same]);
      continue;
    }
    Tensor c;
    {
      NoGradGuard no_grad;
      c = empty_strided(x.sizes(), x.strides(), {.dtype = x.dtype(), .device = x.device()});
      c.copy_(x);
    }
    if (x.requires_grad()) c.requires_grad_(true);
    out.push_back(c);
  }
  return out;
}

void expect_same_values(const Tensor& actual, const Tensor& expected, double rtol, double atol, const std::string& what) {
  ASSERT_EQ(actual.defined(), expected.defined()) << what << ": defined in one mode only";
  if (!expected.defined()) return;
  ASSERT_EQ(actual.sizes(), expected.sizes()) << what << ": sizes differ";
  EXPECT_EQ(actual.dtype(), expected.dtype()) << what << ": dtypes differ";
  EXPECT_EQ(actual.device(), expected.device()) << what << ": devices differ";
  const std::vector<double> a = actual.detach().to_vector<double>();
  const std::vector<double> e = expected.detach().to_vector<double>();
  for (size_t i = 0; i < e.size(); ++i) {
    if (std::isnan(a[i]) && std::isnan(e[i])) continue;
    EXPECT_NEAR(a[i], e[i], atol + rtol * std::abs(e[i])) << what << ", element " << i;
  }
}

// -1 when t shares no storage with any of `others`, else the index of the first that it shares with.
int aliases(const Tensor& t, const TensorList& others) {
  for (size_t i = 0; i < others.size(); ++i)
    if (others[i].defined() && others[i].impl()->storage() == t.impl()->storage()) return static_cast<int>(i);
  return -1;
}

}  // namespace

void expect_compiled_matches_eager(const graphs::GraphFn& fn, const TensorList& inputs, const ParityOptions& options) {
  graphs::CompiledFunction compiled(fn, options.compile);
  for (int call = 0; call < options.calls; ++call) {
    const std::string at = "call " + std::to_string(call) + ": ";
    TensorList eager_in = copy_inputs(inputs);
    TensorList compiled_in = copy_inputs(inputs);
    TensorList expected = fn(eager_in);
    TensorList actual = compiled.call(compiled_in);
    ASSERT_EQ(actual.size(), expected.size()) << at << "number of outputs differs";
    for (size_t i = 0; i < expected.size(); ++i) {
      expect_same_values(actual[i], expected[i], options.rtol, options.atol, at + "output " + std::to_string(i));
      EXPECT_EQ(aliases(actual[i], compiled_in), aliases(expected[i], eager_in))
          << at << "output " << i << " aliases a different input than in eager mode";
      TensorList earlier_actual(actual.begin(), actual.begin() + static_cast<ptrdiff_t>(i));
      TensorList earlier_expected(expected.begin(), expected.begin() + static_cast<ptrdiff_t>(i));
      EXPECT_EQ(aliases(actual[i], earlier_actual), aliases(expected[i], earlier_expected))
          << at << "output " << i << " aliases a different output than in eager mode";
      EXPECT_EQ(actual[i].requires_grad(), expected[i].requires_grad())
          << at << "output " << i << " requires_grad differs";
    }
    for (size_t i = 0; i < inputs.size(); ++i)
      expect_same_values(compiled_in[i], eager_in[i], options.rtol, options.atol, at + "input " + std::to_string(i) + " after the call");

    TensorList eager_diff, compiled_diff, weights;
    for (size_t i = 0; i < expected.size(); ++i) {
      if (!expected[i].requires_grad() || !actual[i].requires_grad()) continue;
      eager_diff.push_back(expected[i]);
      compiled_diff.push_back(actual[i]);
      NoGradGuard no_grad;
      weights.push_back(rand(expected[i].sizes(), {.dtype = expected[i].dtype(), .device = expected[i].device()}));
    }
    if (eager_diff.empty()) continue;
    backward(eager_diff, weights);
    backward(compiled_diff, weights);
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (!eager_in[i].requires_grad()) continue;
      expect_same_values(compiled_in[i].grad(), eager_in[i].grad(), options.rtol, options.atol,
                         at + "grad of input " + std::to_string(i));
    }
  }
}

}  // namespace tg::testing
