// Stochastic gradient descent with momentum, dampening, Nesterov momentum and weight decay.
#pragma once

#include "optim/optimizer.h"

namespace tg::optim {

// Hyper-parameters, named as in torch.optim.SGD.
struct SGDOptions {
  double lr = 1e-3;
  double momentum = 0.0;
  double dampening = 0.0;
  bool nesterov = false;
  double weight_decay = 0.0;
};

// PyTorch's SGD rule: g += wd*p; buf = momentum*buf + (1-dampening)*g (buf = g on the first step);
// g = nesterov ? g + momentum*buf : buf; p -= lr*g. Plain SGD costs one kernel per parameter.
class SGD : public Optimizer {
 public:
  SGD(TensorList params, SGDOptions options = {});
  void update(const TensorList& grads) override;
  std::map<std::string, Tensor> state_dict() const override;
  void load_state_dict(const std::map<std::string, Tensor>& dict) override;
  const SGDOptions& options() const { return options_; }

 private:
  // The capturable update as one fused sgd_step_ per device and dtype; false (nothing done) while
  // some parameter lacks a grad or a momentum buffer, or a tensor is not contiguous.
  bool update_fused(const TensorList& grads);

  SGDOptions options_;
  TensorList momentum_;  // one buffer per parameter, created on its first update
};

}  // namespace tg::optim
