// The formulas are torch.optim.lr_scheduler's, operation for operation, so that the values agree
// with PyTorch's to the last bit. See Note [Learning-rate schedulers] in docs/fused_optimizers.md.
#include "optim/lr_schedulers.h"

#include <cmath>
#include <numbers>

#include "tensor/check.h"

namespace tg::optim {

LambdaLR::LambdaLR(Optimizer& optimizer, std::function<double(int64_t)> lr_lambda, int64_t last_epoch)
    : LRScheduler(optimizer, last_epoch, "LambdaLR"), lr_lambda_(std::move(lr_lambda)) {
  TG_CHECK(static_cast<bool>(lr_lambda_), "[LambdaLR] lr_lambda is an empty function");
  initial_step();
}

double LambdaLR::get_lr() const { return base_lrs_[0] * lr_lambda_(last_epoch_); }

StepLR::StepLR(Optimizer& optimizer, int64_t step_size, double gamma, int64_t last_epoch)
    : LRScheduler(optimizer, last_epoch, "StepLR"), step_size_(step_size), gamma_(gamma) {
  TG_CHECK(step_size > 0, "[StepLR] step_size must be positive, got ", step_size);
  initial_step();
}

double StepLR::get_lr() const {
  if (last_epoch_ == 0 || last_epoch_ % step_size_ != 0) return current_lr();
  return current_lr() * gamma_;
}

std::optional<double> StepLR::closed_form_lr() const {
  // Python's // floors; epochs here are never negative.
  return base_lrs_[0] * std::pow(gamma_, static_cast<double>(last_epoch_ / step_size_));
}

void StepLR::fields(Fields& f) {
  f.ints.push_back({"step_size", &step_size_});
  f.reals.push_back({"gamma", &gamma_});
}

LinearLR::LinearLR(Optimizer& optimizer, double start_factor, double end_factor, int64_t total_iters,
                   int64_t last_epoch)
    : LRScheduler(optimizer, last_epoch, "LinearLR"),
      start_factor_(start_factor),
      end_factor_(end_factor),
      total_iters_(total_iters) {
  TG_CHECK(start_factor > 0.0 && start_factor <= 1.0,
           "[LinearLR] Starting multiplicative factor expected to be greater than 0 and less or equal to 1, got ",
           start_factor);
  TG_CHECK(end_factor >= 0.0 && end_factor <= 1.0,
           "[LinearLR] Ending multiplicative factor expected to be between 0 and 1, got ", end_factor);
  TG_CHECK(total_iters >= 0, "[LinearLR] total_iters must not be negative, got ", total_iters);
  initial_step();
}

double LinearLR::get_lr() const {
  if (last_epoch_ == 0) return current_lr() * start_factor_;
  if (last_epoch_ > total_iters_) return current_lr();
  return current_lr() * (1. + (end_factor_ - start_factor_) /
                                  (static_cast<double>(total_iters_) * start_factor_ +
                                   static_cast<double>(last_epoch_ - 1) * (end_factor_ - start_factor_)));
}

std::optional<double> LinearLR::closed_form_lr() const {
  TG_CHECK(total_iters_ > 0, "[LinearLR] the closed form divides by total_iters, which is 0");
  return base_lrs_[0] * (start_factor_ + (end_factor_ - start_factor_) *
                                             static_cast<double>(std::min(total_iters_, last_epoch_)) /
                                             static_cast<double>(total_iters_));
}

void LinearLR::fields(Fields& f) {
  f.reals.push_back({"start_factor", &start_factor_});
  f.reals.push_back({"end_factor", &end_factor_});
  f.ints.push_back({"total_iters", &total_iters_});
}

CosineAnnealingLR::CosineAnnealingLR(Optimizer& optimizer, int64_t T_max, double eta_min, int64_t last_epoch)
    : LRScheduler(optimizer, last_epoch, "CosineAnnealingLR"), T_max_(T_max), eta_min_(eta_min) {
  TG_CHECK(T_max > 0, "[CosineAnnealingLR] T_max must be positive, got ", T_max);
  initial_step();
}

double CosineAnnealingLR::get_lr() const {
  constexpr double pi = std::numbers::pi;
  const double t = static_cast<double>(last_epoch_);
  const double T = static_cast<double>(T_max_);
  const double base = base_lrs_[0];
  if (last_epoch_ == 0) return current_lr();
  if (step_count_ == 1 && last_epoch_ > 0) return eta_min_ + (base - eta_min_) * (1 + std::cos(t * pi / T)) / 2;
  if ((last_epoch_ - 1 - T_max_) % (2 * T_max_) == 0)  // zero or not alike under C++'s and Python's %
    return current_lr() + (base - eta_min_) * (1 - std::cos(pi / T)) / 2;
  return (1 + std::cos(pi * t / T)) / (1 + std::cos(pi * (t - 1) / T)) * (current_lr() - eta_min_) + eta_min_;
}

std::optional<double> CosineAnnealingLR::closed_form_lr() const {
  constexpr double pi = std::numbers::pi;
  return eta_min_ + (base_lrs_[0] - eta_min_) *
                        (1 + std::cos(pi * static_cast<double>(last_epoch_) / static_cast<double>(T_max_))) / 2;
}

void CosineAnnealingLR::fields(Fields& f) {
  f.ints.push_back({"T_max", &T_max_});
  f.reals.push_back({"eta_min", &eta_min_});
}

}  // namespace tg::optim
