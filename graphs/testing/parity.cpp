// See Note [Testing and sanitizers] in docs/testing.md.
#include "graphs/testing/parity.h"

#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

#include "autograd/engine.h"
#include "ops/factory/factory.h"
#include "tensor/grad_mode.h"

namespace tg::testing {

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

std::optional<std::string> value_difference(const Tensor& actual, const Tensor& expected, double rtol, double atol,
                                            const std::string& what) {
  if (actual.defined() != expected.defined()) return what + ": defined in one mode only";
  if (!expected.defined()) return std::nullopt;
  std::ostringstream os;
  if (actual.sizes() != expected.sizes()) {
    os << what << ": sizes differ, compiled " << shape_str(actual.sizes()) << " vs eager " << shape_str(expected.sizes());
    return os.str();
  }
  if (actual.dtype() != expected.dtype())
    return what + ": dtypes differ, compiled " + std::string(dtype_name(actual.dtype())) + " vs eager " +
           std::string(dtype_name(expected.dtype()));
  if (actual.device() != expected.device()) return what + ": devices differ";
  const std::vector<double> a = actual.detach().to_vector<double>();
  const std::vector<double> e = expected.detach().to_vector<double>();
  for (size_t i = 0; i < e.size(); ++i) {
    if (std::isnan(a[i]) && std::isnan(e[i])) continue;
    if (std::isinf(e[i]) && a[i] == e[i]) continue;
    if (!(std::abs(a[i] - e[i]) <= atol + rtol * std::abs(e[i]))) {
      os << what << ", element " << i << ": compiled " << a[i] << " vs eager " << e[i];
      return os.str();
    }
  }
  return std::nullopt;
}

int aliases(const Tensor& t, const TensorList& others) {
  for (size_t i = 0; i < others.size(); ++i)
    if (others[i].defined() && others[i].impl()->storage() == t.impl()->storage()) return static_cast<int>(i);
  return -1;
}

std::optional<std::string> call_difference(const TensorList& actual, const TensorList& expected,
                                           const TensorList& compiled_in, const TensorList& eager_in, double rtol,
                                           double atol, const std::string& at) {
  if (actual.size() != expected.size()) return at + "number of outputs differs";
  for (size_t i = 0; i < expected.size(); ++i)
    if (actual[i].requires_grad() != expected[i].requires_grad())
      return at + "output " + std::to_string(i) + " requires_grad differs";
  for (size_t i = 0; i < expected.size(); ++i) {
    const std::string out = "output " + std::to_string(i);
    if (auto d = value_difference(actual[i], expected[i], rtol, atol, at + out)) return d;
    if (aliases(actual[i], compiled_in) != aliases(expected[i], eager_in))
      return at + out + " aliases a different input than in eager mode";
    const TensorList earlier_actual(actual.begin(), actual.begin() + static_cast<ptrdiff_t>(i));
    const TensorList earlier_expected(expected.begin(), expected.begin() + static_cast<ptrdiff_t>(i));
    if (aliases(actual[i], earlier_actual) != aliases(expected[i], earlier_expected))
      return at + out + " aliases a different output than in eager mode";
  }
  for (size_t i = 0; i < eager_in.size(); ++i)
    if (auto d = value_difference(compiled_in[i], eager_in[i], rtol, atol,
                                  at + "input " + std::to_string(i) + " after the call"))
      return d;
  return std::nullopt;
}

std::optional<std::string> grads_difference(const TensorList& compiled_in, const TensorList& eager_in, double rtol,
                                            double atol, const std::string& at) {
  for (size_t i = 0; i < eager_in.size(); ++i) {
    if (!eager_in[i].requires_grad()) continue;
    if (auto d = value_difference(compiled_in[i].grad(), eager_in[i].grad(), rtol, atol,
                                  at + "grad of input " + std::to_string(i)))
      return d;
  }
  return std::nullopt;
}

namespace {

// One call in both modes; the first difference, or nullopt.
std::optional<std::string> compare_call(graphs::CompiledFunction& compiled, const graphs::GraphFn& fn,
                                        const TensorList& inputs, const ParityOptions& options, int call,
                                        std::optional<std::string>& eager_error) {
  const std::string at = "call " + std::to_string(call) + ": ";
  TensorList eager_in = copy_inputs(inputs);
  TensorList compiled_in = copy_inputs(inputs);
  TensorList expected, actual, weights;
  try {
    if (options.seed) manual_seed(*options.seed + static_cast<uint64_t>(call));
    expected = fn(eager_in);
    weights = backward_with_random_weights(expected);
  } catch (const Error& e) {
    eager_error = e.what();
    return std::nullopt;
  }
  try {
    if (options.seed) manual_seed(*options.seed + static_cast<uint64_t>(call));
    actual = compiled.call(compiled_in);
    if (auto d = call_difference(actual, expected, compiled_in, eager_in, options.rtol, options.atol, at)) return d;
    backward_with_weights(actual, weights);
  } catch (const Error& e) {
    return at + "compiled mode raised where eager mode did not: " + e.what();
  }
  return grads_difference(compiled_in, eager_in, options.rtol, options.atol, at);
}

}  // namespace

TensorList backward_with_random_weights(const TensorList& outputs) {
  TensorList weights;
  {
    NoGradGuard no_grad;
    for (const Tensor& out : outputs)
      if (out.requires_grad()) weights.push_back(rand(out.sizes(), {.dtype = out.dtype(), .device = out.device()}));
  }
  backward_with_weights(outputs, weights);
  return weights;
}

void backward_with_weights(const TensorList& outputs, const TensorList& weights) {
  TensorList differentiable;
  for (const Tensor& out : outputs)
    if (out.requires_grad()) differentiable.push_back(out);
  if (!differentiable.empty()) backward(differentiable, weights);
}

ParityReport compare_compiled_with_eager(const graphs::GraphFn& fn, const TensorList& inputs,
                                         const ParityOptions& options) {
  ParityReport report;
  graphs::CompiledFunction compiled(fn, options.compile);
  for (int call = 0; call < options.calls && !report.difference && !report.eager_error; ++call)
    report.difference = compare_call(compiled, fn, inputs, options, call, report.eager_error);
  return report;
}

void expect_compiled_matches_eager(const graphs::GraphFn& fn, const TensorList& inputs, const ParityOptions& options) {
  const ParityReport report = compare_compiled_with_eager(fn, inputs, options);
  if (report.eager_error) ADD_FAILURE() << "eager mode raised: " << *report.eager_error;
  if (report.difference) ADD_FAILURE() << *report.difference;
}

}  // namespace tg::testing
