// See Note [Learning-rate schedulers] in docs/fused_optimizers.md.
#include "optim/sequential_lr.h"

#include <algorithm>

#include "tensor/check.h"

namespace tg::optim {

SequentialLR::SequentialLR(Optimizer& optimizer, std::vector<std::shared_ptr<LRScheduler>> schedulers,
                           std::vector<int64_t> milestones, int64_t last_epoch)
    : LRScheduler(optimizer, Composite{}, "SequentialLR"),
      schedulers_(std::move(schedulers)),
      milestones_(std::move(milestones)) {
  TG_CHECK(!schedulers_.empty(), "[SequentialLR] expects at least one scheduler");
  for (size_t i = 0; i < schedulers_.size(); ++i) {
    TG_CHECK(schedulers_[i] != nullptr, "[SequentialLR] scheduler ", i, " is null");
    TG_CHECK(&schedulers_[i]->optimizer() == &optimizer,
             "[SequentialLR] Sequential Schedulers expects all schedulers to belong to the same optimizer, but got "
             "schedulers at index ", i, " to be different than the optimizer passed in.");
  }
  TG_CHECK(milestones_.size() + 1 == schedulers_.size(),
           "[SequentialLR] Sequential Schedulers expects number of schedulers provided to be one more than the "
           "number of milestone points, but got number of schedulers ", schedulers_.size(),
           " and the number of milestones to be equal to ", milestones_.size());
  last_epoch_ = last_epoch + 1;
  // Back to the initial learning rate, the schedulers' constructor steps undone, and only the first
  // scheduler's initial step taken again.
  optimizer.set_lr(*optimizer.initial_lr());
  undo_step();
  schedulers_[0]->initial_step();
  last_lr_ = schedulers_[0]->get_last_lr();
}

void SequentialLR::undo_step() {
  for (const std::shared_ptr<LRScheduler>& s : schedulers_) s->undo_step();
}

void SequentialLR::step() {
  ++last_epoch_;
  const size_t idx = static_cast<size_t>(
      std::upper_bound(milestones_.begin(), milestones_.end(), last_epoch_) - milestones_.begin());
  LRScheduler& scheduler = *schedulers_[idx];
  if (idx > 0 && milestones_[idx - 1] == last_epoch_) {
    scheduler.step_to(0);
  } else {
    scheduler.step();
  }
  last_lr_ = scheduler.get_last_lr();
}

void SequentialLR::step_to(int64_t epoch) {
  TG_CHECK(false, "[SequentialLR] a SequentialLR steps one epoch at a time; it can't start another at epoch ", epoch);
}

std::map<std::string, Tensor> SequentialLR::state_dict() const {
  std::map<std::string, Tensor> out;
  out["last_epoch"] = number(static_cast<double>(last_epoch_));
  for (size_t i = 0; i < last_lr_.size(); ++i) out["_last_lr." + std::to_string(i)] = number(last_lr_[i]);
  for (size_t k = 0; k < milestones_.size(); ++k)
    out["_milestones." + std::to_string(k)] = number(static_cast<double>(milestones_[k]));
  for (size_t k = 0; k < schedulers_.size(); ++k)
    for (auto& [key, value] : schedulers_[k]->state_dict()) out["_schedulers." + std::to_string(k) + "." + key] = value;
  return out;
}

void SequentialLR::load_state_dict(const std::map<std::string, Tensor>& dict) {
  check_keys(dict);
  std::vector<std::map<std::string, Tensor>> parts(schedulers_.size());
  for (const auto& [key, value] : dict) {
    if (key.rfind("_schedulers.", 0) != 0) continue;
    const size_t dot = key.find('.', 12);
    parts[std::stoul(key.substr(12, dot - 12))][key.substr(dot + 1)] = value;
  }
  for (size_t k = 0; k < schedulers_.size(); ++k) schedulers_[k]->check_keys(parts[k]);
  // Everything checked: apply.
  last_epoch_ = static_cast<int64_t>(number_of(dict, "last_epoch"));
  for (size_t i = 0; i < last_lr_.size(); ++i) last_lr_[i] = number_of(dict, "_last_lr." + std::to_string(i));
  for (size_t k = 0; k < milestones_.size(); ++k)
    milestones_[k] = static_cast<int64_t>(number_of(dict, "_milestones." + std::to_string(k)));
  for (size_t k = 0; k < schedulers_.size(); ++k) schedulers_[k]->load_state_dict(parts[k]);
}

}  // namespace tg::optim
