// See Note [Fused optimizer steps] in docs/fused_optimizers.md.
#include "optim/sgd.h"

#include "autograd/grad_mode.h"
#include "ops/binary.h"
#include "ops/copy.h"
#include "ops/optim_step.h"

namespace tg::optim {

SGD::SGD(TensorList params, SGDOptions options)
    : Optimizer(std::move(params), options.lr), options_(options), momentum_(params_.size()) {
  TG_CHECK(options.momentum >= 0.0, "[SGD] invalid momentum value: ", options.momentum);
  TG_CHECK(options.weight_decay >= 0.0, "[SGD] invalid weight_decay value: ", options.weight_decay);
  TG_CHECK(!options.nesterov || (options.momentum > 0.0 && options.dampening == 0.0),
           "[SGD] Nesterov momentum requires a momentum and zero dampening, got momentum=", options.momentum,
           " dampening=", options.dampening);
}

void SGD::update(const TensorList& grads) {
  TG_CHECK(grads.size() == params_.size(), "[SGD] got ", grads.size(), " gradients for ", params_.size(), " parameters");
  NoGradGuard no_grad;
  // A skip flag also takes the fused update where it can: its kernel reads the flag on the device.
  if ((capturable_ || skip_if_.defined() || fused_eagerly(grads)) && update_fused(grads)) return;
  if (skipped_on_host()) return;
  const SGDOptions& o = options_;
  const double lr = this->lr();  // a host number baked into a trace, so guarded there
  for (size_t i = 0; i < params_.size(); ++i) {
    Tensor& p = params_[i];
    Tensor g = grads[i];
    if (!g.defined()) continue;
    if (o.weight_decay != 0.0) g = add(g, p, o.weight_decay);
    if (o.momentum != 0.0) {
      Tensor& buf = momentum_[i];
      if (!buf.defined()) {
        buf = clone(g.detach());
      } else {
        state_like(buf, p).mul_(o.momentum).add_(g, 1.0 - o.dampening);
      }
      g = o.nesterov ? add(g, buf, o.momentum) : buf;
    }
    p.add_(g, -lr);
  }
}

bool SGD::update_fused(const TensorList& grads) {
  // Momentum buffers are made from the first gradient (PyTorch's first step); until every
  // parameter has one, the unfused update runs.
  const SGDOptions& o = options_;
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!grads[i].defined()) return false;
    if (o.momentum != 0.0 && (!momentum_[i].defined() || !momentum_[i].is_contiguous())) return false;
    if (!params_[i].is_contiguous()) return false;
  }
  // The learning rate is read from the device (options.lr is then unused): a new one is a fill, not
  // a new trace.
  const SgdStepOptions step_options{lr_.peek(), o.momentum, o.dampening, o.weight_decay, o.nesterov};
  for (const std::vector<size_t>& group : fused_groups(grads)) {
    TensorList params, gs, buffers;
    for (size_t i : group) {
      params.push_back(params_[i]);
      gs.push_back(grads[i].contiguous());
      if (o.momentum != 0.0) buffers.push_back(state_like(momentum_[i], params_[i]));
    }
    sgd_step_(params, gs, buffers, step_options, skip_if_, lr_on(params[0].device()));
  }
  return true;
}

}  // namespace tg::optim
