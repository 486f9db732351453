// Optimizer: the base of parameter-update rules; updates run in place under no-grad.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "optim/device_scalar.h"
#include "tensor/tensor.h"

namespace tg::optim {

// Holds the parameters it updates (shared handles, so moving a module with to(device) keeps them
// valid) and a learning rate that schedulers may change between steps. The learning rate is a
// DeviceScalar: the fused updates (capturable ones, and CUDA's eager ones) read it from the device,
// so changing it never re-traces. The other numeric hyperparameters of the optimizers (SGD's
// momentum, dampening and weight decay; Adam's betas, eps and weight decay) are DeviceScalars too.
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
  // that update() can be captured in a CUDA graph and replayed. Off by default: CUDA parameters take
  // the same fused update eagerly, CPU ones count steps on the host.
  virtual void set_capturable(bool value) { capturable_ = value; }
  bool capturable() const { return capturable_; }
  // True when the next update must run eagerly because it creates state (SGD's momentum buffers,
  // made from the gradient on the first step with a nonzero momentum): compiled steps run it
  // outside the trace, and trace the update once the state exists.
  virtual bool needs_eager_step() const { return false; }
  // Clears gradients: drops them (set_to_none, the default, as in PyTorch) or zeroes them in place.
  void zero_grad(bool set_to_none = true);

  // The state as flat entries with PyTorch's names: "state.<i>.<name>" for parameter i
  // (exp_avg, exp_avg_sq, step, momentum_buffer) and "param_groups.0.<option>" (0-dim float64).
  virtual std::map<std::string, Tensor> state_dict() const = 0;
  // Restores a state_dict(): every entry is checked first (unexpected or missing keys, dtype,
  // shape; the error names the key), then copied in place where state exists (so compiled steps
  // keep their addresses). A failed load changes nothing.
  virtual void load_state_dict(const std::map<std::string, Tensor>& dict) = 0;

  const TensorList& params() const { return params_; }
  // The learning rate on the host (read while tracing, a guarded value baked into the graph).
  double lr() const { return lr_.value(); }
  // Sets the learning rate: the host value, and in place the device copies the fused updates read
  // (a fill, no graph change: compiled steps replay with the new value). Wrappers that drive another
  // optimizer pass it on.
  virtual void set_lr(double lr);
  // The learning rate as a 0-dim float64 tensor on `device`, which the fused updates read.
  Tensor lr_on(Device device) { return lr_.on(device); }
  // The learning rate the first scheduler found, kept for the schedulers attached later (PyTorch's
  // param_groups[0]["initial_lr"]); unset until a scheduler sets it.
  const std::optional<double>& initial_lr() const { return initial_lr_; }
  void set_initial_lr(double lr) { initial_lr_ = lr; }

  // Until set back to an undefined tensor, updates change nothing where `flag` (a float32 scalar on
  // the parameters' device, such as GradScaler's found-inf flag) is nonzero. Fused updates leave the
  // decision to their kernels (no host synchronization, so it holds inside CUDA graphs); the others
  // read the flag on the host.
  void set_skip_if(Tensor flag) { skip_if_ = std::move(flag); }
  const Tensor& skip_if() const { return skip_if_; }

 protected:
  // Indices of the parameters that have a gradient, grouped by device and dtype in order of first
  // appearance: the parameters one fused update can take together.
  std::vector<std::vector<size_t>> fused_groups(const TensorList& grads) const;
  // True where eager updates take the fused multi-tensor op, as PyTorch's CUDA default takes its
  // multi-tensor kernels: every parameter with a grad is a contiguous CUDA tensor.
  bool fused_eagerly(const TensorList& grads) const;
  // Zeros like `p` the first time, and follows `p` to its device if the module moved since.
  static Tensor& state_like(Tensor& state, const Tensor& p);
  // Checks that dict[key] exists and matches `like`'s dtype and shape (or is a 0-dim number when
  // `like` is undefined); returns it.
  static const Tensor& checked_entry(const std::map<std::string, Tensor>& dict, const std::string& key,
                                     const Tensor& like);
  // Copies `src` into `state` in place when it exists, else makes it a copy of `src` beside `p`.
  static void assign_state(Tensor& state, const Tensor& src, const Tensor& p);

  // True when a skip flag is set and holds a nonzero value (reads it on the host).
  bool skipped_on_host() const;

  TensorList params_;
  DeviceScalar lr_{"lr", 0.0};
  std::optional<double> initial_lr_;
  bool capturable_ = false;
  Tensor skip_if_;
};

}  // namespace tg::optim
