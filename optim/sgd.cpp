#include "optim/sgd.h"

#include "autograd/grad_mode.h"
#include "ops/binary.h"
#include "ops/copy.h"

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

}  // namespace tg::optim
