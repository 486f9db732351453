// Fused optimizer updates: one op (one kernel launch per device and dtype on CUDA) that updates
// every parameter of a group, for eager steps and inside compiled graphs alike.
#pragma once

#include "tensor/tensor.h"

namespace tg {

// Adam's hyper-parameters for one fused step; `decoupled` applies weight decay as AdamW does.
struct AdamStepOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
  bool decoupled = false;
};

// One Adam update of every params[i] from grads[i], in place: exp_avgs, exp_avg_sqs and steps (0-dim
// float32 step counts kept on the device, as in PyTorch) advance too, and the bias corrections are
// read from the steps, so a captured step stays right on every replay. All tensors share one device;
// params, grads, exp_avgs and exp_avg_sqs share one floating dtype, are contiguous and shaped like
// their parameter.
// With skip_if (a float32 scalar on the parameters' device), nothing changes where it is nonzero: the
// kernels read it, so the decision needs no host synchronization (GradScaler's skipped steps).
// With lr (a float32 or float64 scalar on the parameters' device), its value replaces options.lr:
// the kernels read it when they run, so a captured or traced step follows a changing learning rate.
void adam_step_(const TensorList& params, const TensorList& grads, const TensorList& exp_avgs,
                const TensorList& exp_avg_sqs, const TensorList& steps, const AdamStepOptions& options,
                const Tensor& skip_if = Tensor(), const Tensor& lr = Tensor());

// Device scalars (float32 or float64, 0-dim, on the parameters' device) that replace Adam's options:
// each defined one is read by the kernels when they run, so a captured or traced step follows every
// change of its value (the bias corrections 1 - beta^t are computed from the betas read then).
struct AdamStepScalars {
  Tensor lr, beta1, beta2, eps, weight_decay;
};

// adam_step_ reading every defined entry of `scalars` instead of the option of the same name.
void adam_step_(const TensorList& params, const TensorList& grads, const TensorList& exp_avgs,
                const TensorList& exp_avg_sqs, const TensorList& steps, const AdamStepOptions& options,
                const Tensor& skip_if, const AdamStepScalars& scalars);

// SGD's hyper-parameters for one fused step (PyTorch's update rule; momentum 0 uses no buffers).
struct SgdStepOptions {
  double lr = 1e-3;
  double momentum = 0.0;
  double dampening = 0.0;
  double weight_decay = 0.0;
  bool nesterov = false;
};

// One SGD update of every params[i] from grads[i], in place; with momentum, momentum_buffers[i]
// (existing buffers, as after PyTorch's first step) advance too, otherwise the list is empty. All
// tensors share one device and floating dtype, are contiguous and shaped like their parameter.
// skip_if and lr: as for adam_step_.
void sgd_step_(const TensorList& params, const TensorList& grads, const TensorList& momentum_buffers,
               const SgdStepOptions& options, const Tensor& skip_if = Tensor(), const Tensor& lr = Tensor());

// Device scalars that replace SGD's options, as AdamStepScalars do Adam's. Whether momentum buffers
// are used stays options.momentum != 0 (a structural choice); a momentum tensor only sets the value.
struct SgdStepScalars {
  Tensor lr, momentum, dampening, weight_decay;
};

// sgd_step_ reading every defined entry of `scalars` instead of the option of the same name.
void sgd_step_(const TensorList& params, const TensorList& grads, const TensorList& momentum_buffers,
               const SgdStepOptions& options, const Tensor& skip_if, const SgdStepScalars& scalars);

}  // namespace tg
