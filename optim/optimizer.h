// Optimizer: the base of parameter-update rules; updates run in place under no-grad.
#pragma once

#include "tensor/tensor.h"

namespace tg::optim {

// Holds the parameters it updates (shared handles, so moving a module with to(device) keeps them
// valid) and a learning rate that schedulers may change between steps.
class Optimizer {
 public:
  // Every parameter must be a defined floating-point leaf that requires grad.
  Optimizer(TensorList params, double lr);
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // Applies one update from the parameters' current .grad; parameters without a grad are skipped.
  void step();
  // Applies one update from `grads` (one per parameter, undefined to skip it). Compiled optimizer
  // steps trace this with the gradients as arguments.
  virtual void update(const TensorList& grads) = 0;
  // Keeps every piece of per-step state on the device (no host counters baked into a trace), so
  // that update() can be captured in a CUDA graph and replayed. Off by default (fewer kernels).
  virtual void set_capturable(bool value) { capturable_ = value; }
  bool capturable() const { return capturable_; }
  // Clears gradients: drops them (set_to_none, the default, as in PyTorch) or zeroes them in place.
  void zero_grad(bool set_to_none = true);

  const TensorList& params() const { return params_; }
  double lr() const { return lr_; }
  void set_lr(double lr);

 protected:
  // Zeros like `p` the first time, and follows `p` to its device if the module moved since.
  static Tensor& state_like(Tensor& state, const Tensor& p);

  TensorList params_;
  double lr_;
  bool capturable_ = false;
};

}  // namespace tg::optim
