// Adam and AdamW: adaptive moment estimation with bias correction.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "optim/optimizer.h"

namespace tg::optim {

// Hyper-parameters, named as in torch.optim.Adam.
struct AdamOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
};

// m = b1*m + (1-b1)*g; v = b2*v + (1-b2)*g^2;
// p -= lr/(1-b1^t) * m / (sqrt(v)/sqrt(1-b2^t) + eps).
// Adam couples weight decay into the gradient (g += wd*p), as L2 regularization does.
// beta1, beta2, eps and weight_decay are device scalars like the learning rate: the fused update reads
// them on the device (and computes the bias corrections 1 - beta^t there from the betas and the
// device step counts), so changing them never re-traces a compiled step.
class Adam : public Optimizer {
 public:
  Adam(TensorList params, AdamOptions options = {});
  void update(const TensorList& grads) override;
  std::map<std::string, Tensor> state_dict() const override;
  void load_state_dict(const std::map<std::string, Tensor>& dict) override;
  // The options with today's values (lr, betas, eps and weight_decay as last set).
  AdamOptions options() const;

  // The host values (read while tracing, guarded values baked into the graph, as lr() is).
  std::pair<double, double> betas() const { return {beta1_.value(), beta2_.value()}; }
  double eps() const { return eps_.value(); }
  double weight_decay() const { return weight_decay_.value(); }
  // Set the host values and fill the device copies in place (param_groups[0]["betas"] = (b1, b2),
  // ...); the values are checked as the constructor checks them.
  void set_betas(double beta1, double beta2);
  void set_eps(double eps);
  void set_weight_decay(double weight_decay);
  // The device copies (0-dim float64 on `device`) that the fused updates read.
  Tensor beta1_on(Device device) { return beta1_.on(device); }
  Tensor beta2_on(Device device) { return beta2_.on(device); }
  Tensor eps_on(Device device) { return eps_.on(device); }
  Tensor weight_decay_on(Device device) { return weight_decay_.on(device); }
  // Number of step() calls so far.
  int64_t step_count() const { return step_; }

 protected:
  // True for AdamW: decay multiplies the parameter by (1 - lr*wd) instead of entering the moments.
  Adam(TensorList params, AdamOptions options, bool decoupled);

 private:
  // The fused update (capturable, and eager on CUDA): one adam_step_ per device and dtype, step
  // counts on the device.
  void update_fused(const TensorList& grads);

  // "[Adam]" or "[AdamW]", for messages.
  const char* name() const { return decoupled_ ? "[AdamW]" : "[Adam]"; }

  bool decoupled_;
  DeviceScalar beta1_{"beta1", 0.9};
  DeviceScalar beta2_{"beta2", 0.999};
  DeviceScalar eps_{"eps", 1e-8};
  DeviceScalar weight_decay_{"weight_decay", 0.0};
  int64_t step_ = 0;
  TensorList exp_avg_;     // first moments, created on each parameter's first update
  TensorList exp_avg_sq_;  // second moments
  std::vector<int64_t> param_steps_;  // per parameter: updates applied (t in the bias corrections)
  TensorList device_steps_;  // fused updates: the same counts as 0-dim float32 tensors on each parameter's device
};

// Adam with decoupled weight decay (Loshchilov & Hutter): p *= 1 - lr*wd before the Adam update.
// The default weight_decay is 1e-2, as in torch.optim.AdamW.
class AdamW : public Adam {
 public:
  AdamW(TensorList params, AdamOptions options = {.weight_decay = 1e-2});
};

}  // namespace tg::optim
