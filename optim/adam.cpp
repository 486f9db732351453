// See Note [Fused optimizer steps] in docs/fused_optimizers.md.
#include "optim/adam.h"

#include <cmath>

#include "ops/elementwise/binary.h"
#include "ops/elementwise/unary.h"
#include "ops/factory/factory.h"
#include "ops/optim/optim_step.h"
#include "tensor/grad_mode.h"

namespace tg::optim {

Adam::Adam(TensorList params, AdamOptions options) : Adam(std::move(params), options, false) {}

Adam::Adam(TensorList params, AdamOptions options, bool decoupled)
    : Optimizer(std::move(params), options.lr),
      decoupled_(decoupled),
      exp_avg_(params_.size()),
      exp_avg_sq_(params_.size()),
      param_steps_(params_.size(), 0) {
  set_eps(options.eps);
  set_betas(options.beta1, options.beta2);
  set_weight_decay(options.weight_decay);
}

AdamOptions Adam::options() const {
  return {lr_.peek(), beta1_.peek(), beta2_.peek(), eps_.peek(), weight_decay_.peek()};
}

void Adam::set_betas(double beta1, double beta2) {
  TG_CHECK(beta1 >= 0.0 && beta1 < 1.0, name(), " invalid beta parameter at index 0: ", beta1);
  TG_CHECK(beta2 >= 0.0 && beta2 < 1.0, name(), " invalid beta parameter at index 1: ", beta2);
  beta1_.set(beta1);
  beta2_.set(beta2);
}

void Adam::set_eps(double eps) {
  TG_CHECK(eps >= 0.0, name(), " invalid epsilon value: ", eps);
  eps_.set(eps);
}

void Adam::set_weight_decay(double weight_decay) {
  TG_CHECK(weight_decay >= 0.0, name(), " invalid weight_decay value: ", weight_decay);
  weight_decay_.set(weight_decay);
}

AdamW::AdamW(TensorList params, AdamOptions options) : Adam(std::move(params), options, true) {}

void Adam::update(const TensorList& grads) {
  TG_CHECK(grads.size() == params_.size(), "[Adam] got ", grads.size(), " gradients for ", params_.size(),
           " parameters");
  NoGradGuard no_grad;
  if (!capturable_ && skipped_on_host()) return;  // the fused update's kernel decides on the device
  ++step_;
  if (capturable_ || fused_eagerly(grads)) {
    update_fused(grads);
    return;
  }
  // Host numbers baked into a trace, so guarded there.
  const double lr = this->lr(), eps = this->eps(), wd = weight_decay();
  const auto [beta1, beta2] = betas();
  for (size_t i = 0; i < params_.size(); ++i) {
    Tensor& p = params_[i];
    Tensor g = grads[i];
    if (!g.defined()) continue;
    // Each parameter counts its own updates, as in PyTorch: one skipped for lack of a grad
    // keeps its bias correction where it was.
    const double t = static_cast<double>(++param_steps_[i]);
    if (i < device_steps_.size() && device_steps_[i].defined()) device_steps_[i].fill_(t);  // as state_dict reads
    if (wd != 0.0) {
      if (decoupled_) {
        p.mul_(1.0 - lr * wd);
      } else {
        g = add(g, p, wd);
      }
    }
    Tensor& m = state_like(exp_avg_[i], p);
    Tensor& v = state_like(exp_avg_sq_[i], p);
    m.mul_(beta1).add_(g, 1.0 - beta1);
    v.mul_(beta2).add_(g * g, 1.0 - beta2);
    const double bias1 = 1.0 - std::pow(beta1, t);
    const double bias2_sqrt = std::sqrt(1.0 - std::pow(beta2, t));
    // lr/bias1 * m / (sqrt(v)/bias2_sqrt + eps), with bias2_sqrt moved out of the denominator
    // to save a kernel: (lr*bias2_sqrt/bias1) * m / (sqrt(v) + eps*bias2_sqrt).
    const double step_size = lr * bias2_sqrt / bias1;
    Tensor denom = sqrt(v);
    denom.add_(eps * bias2_sqrt);
    p.add_(m / denom, -step_size);
  }
}

void Adam::update_fused(const TensorList& grads) {
  // The step counts live on the device (float32, as in PyTorch), so a captured update computes the
  // right bias corrections on every replay; parameters sharing a device and dtype are updated by one
  // fused op. Every hyperparameter is read from the device too (the options' values are then
  // unused): a new one is a fill, not a new trace.
  device_steps_.resize(params_.size());
  const AdamStepOptions step_options{.decoupled = decoupled_};
  for (const std::vector<size_t>& group : fused_groups(grads)) {
    TensorList params, gs, exp_avgs, exp_avg_sqs, steps;
    for (size_t i : group) {
      Tensor& p = params_[i];
      const double t = static_cast<double>(++param_steps_[i]);
      Tensor& step = device_steps_[i];
      if (!step.defined() || step.device() != p.device()) step = full({}, t - 1.0, {.dtype = kFloat32, .device = p.device()});
      params.push_back(p);
      gs.push_back(grads[i].contiguous());
      exp_avgs.push_back(state_like(exp_avg_[i], p));
      exp_avg_sqs.push_back(state_like(exp_avg_sq_[i], p));
      steps.push_back(step);
    }
    const Device device = params[0].device();
    adam_step_(params, gs, exp_avgs, exp_avg_sqs, steps, step_options, skip_if_,
               AdamStepScalars{lr_on(device), beta1_on(device), beta2_on(device), eps_on(device),
                               weight_decay_on(device)});
  }
}

}  // namespace tg::optim
