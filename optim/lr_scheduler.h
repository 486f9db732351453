// The base of learning-rate schedulers (torch.optim.lr_scheduler.LRScheduler): each step() sets the
// optimizer's learning rate, which fused capturable updates read from the device, so a compiled
// step follows a schedule without re-tracing.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "optim/optimizer.h"

namespace tg::optim {

class SequentialLR;

// PyTorch's scheduler protocol for the optimizer's one parameter group: the constructor takes the
// optimizer's learning rate as base (recording it as initial_lr the first time) and performs the
// initial step (last_epoch -1 -> 0); every step() advances last_epoch and applies the scheduler's
// chainable formula to the current learning rate, as torch.optim.lr_scheduler does.
class LRScheduler {
 public:
  virtual ~LRScheduler() = default;
  LRScheduler(const LRScheduler&) = delete;
  LRScheduler& operator=(const LRScheduler&) = delete;

  // Advances one epoch (or iteration) and sets the optimizer's learning rate: a host value and an in-place
  // fill of its device copies, never a change of a compiled graph.
  virtual void step();
  // The learning rate the latest step set, one per parameter group (one here).
  const std::vector<double>& get_last_lr() const { return last_lr_; }
  // The index of the latest step (0 after construction).
  int64_t last_epoch() const { return last_epoch_; }
  // The scheduled optimizer.
  Optimizer& optimizer() const { return optimizer_; }

  // PyTorch's entries as 0-dim float64 tensors: "last_epoch", "_step_count", "base_lrs.0",
  // "_last_lr.0" and the scheduler's options by their attribute names ("T_max", "eta_min", ...).
  virtual std::map<std::string, Tensor> state_dict() const;
  // Restores a state_dict() of the same kind of scheduler: the keys must be exactly this scheduler's
  // and every entry one number (checked before anything changes). The optimizer's learning rate is
  // left alone (its own state dict holds it), as in PyTorch.
  virtual void load_state_dict(const std::map<std::string, Tensor>& dict);

 protected:
  // With last_epoch -1 the base learning rate is the optimizer's initial_lr, set to its current
  // learning rate when no scheduler did so before; resuming (last_epoch >= 0) requires initial_lr.
  LRScheduler(Optimizer& optimizer, int64_t last_epoch, std::string name);
  // A scheduler made of others (SequentialLR): no base learning rate of its own.
  struct Composite {};
  LRScheduler(Optimizer& optimizer, Composite, std::string name);

  // PyTorch's _initial_step: the step count back to 0, then one step(). Concrete schedulers call it
  // at the end of their constructors (their formulas are virtual).
  void initial_step();
  // The chainable formula: the learning rate at last_epoch_, from the current one (current_lr()).
  virtual double get_lr() const = 0;
  // The closed form at last_epoch_, where the scheduler has one (step_to uses it).
  virtual std::optional<double> closed_form_lr() const { return std::nullopt; }
  // PyTorch's deprecated step(epoch), which SequentialLR uses at its milestones: jumps to `epoch`,
  // with the closed form when there is one.
  virtual void step_to(int64_t epoch);
  // Moves last_epoch back by one (SequentialLR undoes its schedulers' initial steps this way).
  virtual void undo_step() { --last_epoch_; }

  // The scheduler's options, by name, for state_dict and load_state_dict.
  struct Fields {
    std::vector<std::pair<std::string, double*>> reals;
    std::vector<std::pair<std::string, int64_t*>> ints;
  };
  virtual void fields(Fields& f) { (void)f; }

  // A state_dict entry holding `v`, and the number an entry holds (checked by check_keys first).
  static Tensor number(double v);
  static double number_of(const std::map<std::string, Tensor>& dict, const std::string& key);
  // Checks that `dict` has exactly the keys of state_dict(), each holding one number.
  void check_keys(const std::map<std::string, Tensor>& dict) const;

  // The optimizer's current learning rate (PyTorch's group["lr"]).
  double current_lr() const { return optimizer_.lr(); }
  // Sets the optimizer's learning rate and records it as the last one.
  void apply(double lr);

  Optimizer& optimizer_;
  std::string name_;  // for error messages: "[CosineAnnealingLR]"
  std::vector<double> base_lrs_;
  int64_t last_epoch_ = -1;
  int64_t step_count_ = 0;
  std::vector<double> last_lr_;

  friend class SequentialLR;
};

}  // namespace tg::optim
