// Stochastic gradient descent with momentum, dampening, Nesterov momentum and weight decay.
#pragma once

#include "ops/core/guarded_value.h"
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
// momentum, dampening and weight_decay are device scalars like the learning rate: the fused update
// reads them on the device, so changing their values never re-traces a compiled step. Whether
// momentum is zero is structural (PyTorch keeps no buffer then): a compiled step re-traces when it
// turns from zero to nonzero or back. nesterov is a structural flag, fixed at construction.
class SGD : public Optimizer {
 public:
  SGD(TensorList params, SGDOptions options = {});
  void update(const TensorList& grads) override;
  bool needs_eager_step() const override;
  std::map<std::string, Tensor> state_dict() const override;
  void load_state_dict(const std::map<std::string, Tensor>& dict) override;
  // The options with today's values (lr, momentum, dampening and weight_decay as last set).
  SGDOptions options() const;

  // The host values (read while tracing, guarded values baked into the graph, as lr() is).
  double momentum() const { return momentum_.value(); }
  double dampening() const { return dampening_.value(); }
  double weight_decay() const { return weight_decay_.value(); }
  // Set the host value and fill the device copies in place (param_groups[0]["momentum"] = v, ...).
  // The values are checked as the constructor checks them.
  void set_momentum(double momentum);
  void set_dampening(double dampening);
  void set_weight_decay(double weight_decay);
  // The device copies (0-dim float64 on `device`) that the fused updates read.
  Tensor momentum_on(Device device) { return momentum_.on(device); }
  Tensor dampening_on(Device device) { return dampening_.on(device); }
  Tensor weight_decay_on(Device device) { return weight_decay_.on(device); }

 private:
  // The capturable update as one fused sgd_step_ per device and dtype; false (nothing done) while
  // some parameter lacks a grad or a momentum buffer, or a tensor is not contiguous.
  bool update_fused(const TensorList& grads);
  // Whether momentum buffers are in use; under tracing a guard on that alone, not on the value.
  bool uses_momentum() const { return momentum_used_.get(); }

  Guarded<bool> nesterov_{"nesterov", false};  // structural: read under tracing, it is guarded
  DeviceScalar momentum_{"momentum", 0.0};
  DeviceScalar dampening_{"dampening", 0.0};
  DeviceScalar weight_decay_{"weight_decay", 0.0};
  Guarded<bool> momentum_used_{"momentum != 0", false};
  TensorList buffers_;  // one momentum buffer per parameter, created on its first update
};

}  // namespace tg::optim
