#include "optim/sgd.h"

#include <algorithm>

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
  if (capturable_ && update_fused(grads)) return;
  const SGDOptions& o = options_;
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
    p.add_(g, -lr_);
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
  struct Group {
    TensorList params, grads, buffers;
  };
  std::vector<std::pair<std::pair<Device, DType>, Group>> groups;
  for (size_t i = 0; i < params_.size(); ++i) {
    Tensor& p = params_[i];
    const std::pair<Device, DType> key{p.device(), p.dtype()};
    auto it = std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == key; });
    if (it == groups.end()) it = groups.insert(groups.end(), {key, Group{}});
    it->second.params.push_back(p);
    it->second.grads.push_back(grads[i].contiguous());
    if (o.momentum != 0.0) it->second.buffers.push_back(state_like(momentum_[i], p));
  }
  const SgdStepOptions step_options{lr_, o.momentum, o.dampening, o.weight_decay, o.nesterov};
  for (auto& [key, g] : groups) sgd_step_(g.params, g.grads, g.buffers, step_options);
  return true;
}

}  // namespace tg::optim
