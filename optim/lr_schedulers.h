// The learning-rate schedules of torch.optim.lr_scheduler: LambdaLR, StepLR, LinearLR and
// CosineAnnealingLR, with PyTorch's constructor arguments, chainable formulas and closed forms.
#pragma once

#include <functional>

#include "optim/lr_scheduler.h"

namespace tg::optim {

// lr = base_lr * lr_lambda(epoch).
class LambdaLR final : public LRScheduler {
 public:
  LambdaLR(Optimizer& optimizer, std::function<double(int64_t)> lr_lambda, int64_t last_epoch = -1);

 private:
  double get_lr() const override;
  std::function<double(int64_t)> lr_lambda_;  // not part of the state dict (PyTorch saves no functions)
};

// Multiplies the learning rate by gamma every step_size epochs.
class StepLR final : public LRScheduler {
 public:
  StepLR(Optimizer& optimizer, int64_t step_size, double gamma = 0.1, int64_t last_epoch = -1);

 private:
  double get_lr() const override;
  std::optional<double> closed_form_lr() const override;
  void fields(Fields& f) override;
  int64_t step_size_;
  double gamma_;
};

// Moves the learning rate's factor linearly from start_factor to end_factor over total_iters epochs
// (a linear warm-up with the defaults' direction), then keeps it.
class LinearLR final : public LRScheduler {
 public:
  LinearLR(Optimizer& optimizer, double start_factor = 1.0 / 3, double end_factor = 1.0, int64_t total_iters = 5,
           int64_t last_epoch = -1);

 private:
  double get_lr() const override;
  std::optional<double> closed_form_lr() const override;
  void fields(Fields& f) override;
  double start_factor_;
  double end_factor_;
  int64_t total_iters_;
};

// Cosine annealing from the base learning rate down to eta_min over T_max epochs (and back up over
// the next T_max, as PyTorch's recursive form does): eta_min + (base - eta_min)(1 + cos(pi t/T_max))/2.
class CosineAnnealingLR final : public LRScheduler {
 public:
  CosineAnnealingLR(Optimizer& optimizer, int64_t T_max, double eta_min = 0.0, int64_t last_epoch = -1);

 private:
  double get_lr() const override;
  std::optional<double> closed_form_lr() const override;
  void fields(Fields& f) override;
  int64_t T_max_;
  double eta_min_;
};

}  // namespace tg::optim
