
#include "ops/core/widen.h"
#include "ops/elementwise/copy.h"
#include "ops/factory/factory.h"

namespace tg {
namespace {

bool is_16bit(const Tensor& t) { return t.defined() && is_low_precision(t.dtype()); }

}  // namespace

bool eval_widened(const Op& op, const TensorList& inputs, TensorList& outputs) {
  bool any = false;
  for (const Tensor& t : inputs) any = any || is_16bit(t);
  for (const Tensor& t : outputs) any = any || is_16bit(t);
  if (!any) return false;
  TensorList wide_inputs(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i)
    wide_inputs[i] = is_16bit(inputs[i]) ? to(inputs[i], inputs[i].device(), kFloat32) : inputs[i];
  const std::vector<int> written = mutated_inputs(op.schema());
  // An output that is a written input (an in-place op's result) is that input's float32 copy.
  auto written_input_of = [&](const Tensor& out) -> int {
    for (int k : written)
      if (out.defined() && out.is_same(inputs[static_cast<size_t>(k)])) return k;
    return -1;
  };
  TensorList wide_outputs(outputs.size());
  for (size_t i = 0; i < outputs.size(); ++i) {
    const int k = written_input_of(outputs[i]);
    if (k >= 0) wide_outputs[i] = wide_inputs[static_cast<size_t>(k)];
    else if (is_16bit(outputs[i]))
      wide_outputs[i] = empty_strided(outputs[i].sizes(), outputs[i].strides(),
                                      {.dtype = kFloat32, .device = outputs[i].device()});
    else wide_outputs[i] = outputs[i];
  }
  op.eval(wide_inputs, wide_outputs);
  for (int k : written) {
    Tensor target = inputs[static_cast<size_t>(k)];
    if (is_16bit(target)) copy_(target, wide_inputs[static_cast<size_t>(k)]);
  }
  for (size_t i = 0; i < outputs.size(); ++i)
    if (is_16bit(outputs[i]) && written_input_of(outputs[i]) < 0) copy_(outputs[i], wide_outputs[i]);
  return true;
}

}  // namespace tg
