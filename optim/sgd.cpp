// See Note [Fused optimizer steps] in docs/fused_optimizers.md.
#include "optim/sgd.h"

#include "ops/elementwise/binary.h"
#include "ops/elementwise/copy.h"
#include "ops/optim/optim_step.h"
#include "tensor/grad_mode.h"

namespace tg::optim {

SGD::SGD(TensorList params, SGDOptions options)
    : Optimizer(std::move(params), options.lr), buffers_(params_.size()) {
  nesterov_.set(options.nesterov);
  TG_CHECK(!options.nesterov || (options.momentum > 0.0 && options.dampening == 0.0),
           "[SGD] Nesterov momentum requires a momentum and zero dampening, got momentum=", options.momentum,
           " dampening=", options.dampening);
  set_momentum(options.momentum);
  set_dampening(options.dampening);
  set_weight_decay(options.weight_decay);
}

SGDOptions SGD::options() const {
  return {lr_.peek(), momentum_.peek(), dampening_.peek(), nesterov_.peek(), weight_decay_.peek()};
}

void SGD::set_momentum(double momentum) {
  TG_CHECK(momentum >= 0.0, "[SGD] invalid momentum value: ", momentum);
  TG_CHECK(!nesterov_.peek() || momentum > 0.0, "[SGD] Nesterov momentum requires a momentum, got momentum=", momentum);
  momentum_.set(momentum);
  if (momentum_used_.peek() != (momentum != 0.0)) momentum_used_.set(momentum != 0.0);
}

void SGD::set_dampening(double dampening) {
  TG_CHECK(!nesterov_.peek() || dampening == 0.0, "[SGD] Nesterov momentum requires zero dampening, got dampening=",
           dampening);
  dampening_.set(dampening);
}

void SGD::set_weight_decay(double weight_decay) {
  TG_CHECK(weight_decay >= 0.0, "[SGD] invalid weight_decay value: ", weight_decay);
  weight_decay_.set(weight_decay);
}

bool SGD::needs_eager_step() const {
  if (momentum_.peek() == 0.0) return false;
  for (const Tensor& buf : buffers_)
    if (!buf.defined()) return true;
  return false;
}

void SGD::update(const TensorList& grads) {
  TG_CHECK(grads.size() == params_.size(), "[SGD] got ", grads.size(), " gradients for ", params_.size(), " parameters");
  NoGradGuard no_grad;
  // A skip flag also takes the fused update where it can: its kernel reads the flag on the device.
  if ((capturable_ || skip_if_.defined() || fused_eagerly(grads)) && update_fused(grads)) return;
  if (skipped_on_host()) return;
  // Host numbers baked into a trace, so guarded there.
  const double lr = this->lr(), momentum = this->momentum(), dampening = this->dampening(), wd = weight_decay();
  for (size_t i = 0; i < params_.size(); ++i) {
    Tensor& p = params_[i];
    Tensor g = grads[i];
    if (!g.defined()) continue;
    if (wd != 0.0) g = add(g, p, wd);
    if (momentum != 0.0) {
      Tensor& buf = buffers_[i];
      if (!buf.defined()) {
        buf = clone(g.detach());
      } else {
        state_like(buf, p).mul_(momentum).add_(g, 1.0 - dampening);
      }
      g = nesterov_.get() ? add(g, buf, momentum) : buf;
    }
    p.add_(g, -lr);
  }
}

bool SGD::update_fused(const TensorList& grads) {
  // Momentum buffers are made from the first gradient (PyTorch's first step); until every
  // parameter has one, the unfused update runs.
  const bool momentum = uses_momentum();
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!grads[i].defined()) return false;
    if (momentum && (!buffers_[i].defined() || !buffers_[i].is_contiguous())) return false;
    if (!params_[i].is_contiguous()) return false;
  }
  // Every hyperparameter is read from the device (the options' values are then unused, but for
  // momentum's being nonzero, which chooses the buffers): new values are fills, not new traces.
  const SgdStepOptions step_options{lr_.peek(), momentum ? 1.0 : 0.0, 0.0, 0.0, nesterov_.get()};
  for (const std::vector<size_t>& group : fused_groups(grads)) {
    TensorList params, gs, buffers;
    for (size_t i : group) {
      params.push_back(params_[i]);
      gs.push_back(grads[i].contiguous());
      if (momentum) buffers.push_back(state_like(buffers_[i], params_[i]));
    }
    const Device device = params[0].device();
    sgd_step_(params, gs, buffers, step_options, skip_if_,
              SgdStepScalars{lr_on(device), momentum_on(device), dampening_on(device), weight_decay_on(device)});
  }
  return true;
}

}  // namespace tg::optim
