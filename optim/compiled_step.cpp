// See Note [Fused optimizer steps] in docs/fused_optimizers.md.
#include "optim/compiled_step.h"

#include <algorithm>

namespace tg::optim {

CompiledStep::CompiledStep(Optimizer& optimizer, CompileOptions options)
    : optimizer_(optimizer), options_(std::move(options)) {
  optimizer_.set_capturable(true);
}

void CompiledStep::step() {
  TensorList grads;
  grads.reserve(optimizer_.params().size());
  for (const Tensor& p : optimizer_.params()) grads.push_back(p.grad());
  const bool all_grads = std::all_of(grads.begin(), grads.end(), [](const Tensor& g) { return g.defined(); });
  if (!warmed_up_ || !all_grads || optimizer_.needs_eager_step()) {
    if (transform_) transform_(grads);
    optimizer_.update(grads);
    warmed_up_ = all_grads;
    return;
  }
  if (!compiled_) {
    Optimizer* opt = &optimizer_;
    compiled_ = std::make_unique<graphs::CompiledFunction>(
        [opt, transform = transform_](const TensorList& gs) {
          if (transform) transform(gs);
          opt->update(gs);
          return TensorList{};
        },
        options_);
  }
  compiled_->call(grads);
}

void CompiledStep::set_grad_transform(std::function<void(const TensorList& grads)> transform) {
  transform_ = std::move(transform);
  compiled_.reset();
}

const graphs::CompileCounters& CompiledStep::counters() const {
  static const graphs::CompileCounters none;
  return compiled_ ? compiled_->counters() : none;
}

}  // namespace tg::optim
