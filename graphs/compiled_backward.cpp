#include "graphs/compiled_backward.h"

#include "autograd/grad_mode.h"
#include "ops/factory.h"

namespace tg::graphs {

CompiledBackward::CompiledBackward(Runner runner, TensorList saved, std::vector<TensorMeta> tangent_metas)
    : runner_(std::move(runner)), saved_(std::move(saved)) {
  output_metas() = std::move(tangent_metas);
}

TensorList CompiledBackward::apply(TensorList&& grad_outputs) {
  TG_CHECK(!is_grad_enabled(), "torch.compile with aot_autograd does not currently support double backward "
           "(tapegraph: a compiled function's backward cannot itself be differentiated; call backward without "
           "create_graph, or run the function eagerly)");
  TG_CHECK(!released_, "Trying to backward through the graph a second time (or directly access saved tensors after "
           "they have already been freed). Saved intermediate values of the graph are freed when you call "
           ".backward() or autograd.grad(). Specify retain_graph=true if you need to backward through the graph a "
           "second time.");
  TensorList tangents;
  tangents.reserve(grad_outputs.size());
  for (size_t i = 0; i < grad_outputs.size(); ++i) {
    const TensorMeta& m = output_metas()[i];
    Tensor g = grad_outputs[i];
    if (!g.defined()) g = zeros(m.sizes, {.dtype = m.dtype, .device = m.device});
    tangents.push_back(g.is_contiguous() ? g : g.contiguous());
  }
  return runner_(saved_, tangents);
}

void CompiledBackward::release_saved() {
  saved_.clear();
  released_ = true;
}

}  // namespace tg::graphs
