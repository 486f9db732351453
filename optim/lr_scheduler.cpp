// See Note [Learning-rate schedulers] in docs/fused_optimizers.md.
#include "optim/lr_scheduler.h"

#include "ops/factory/factory.h"
#include "tensor/check.h"

namespace tg::optim {

LRScheduler::LRScheduler(Optimizer& optimizer, int64_t last_epoch, std::string name)
    : optimizer_(optimizer), name_(std::move(name)), last_epoch_(last_epoch) {
  TG_CHECK(last_epoch >= -1, "[", name_, "] last_epoch must be -1 (a new schedule) or the index of the last epoch, got ",
           last_epoch);
  if (last_epoch == -1) {
    if (!optimizer.initial_lr()) optimizer.set_initial_lr(optimizer.lr());
  } else {
    TG_CHECK(optimizer.initial_lr().has_value(), "[", name_,
             "] param 'initial_lr' is not specified in param_groups[0] when resuming an optimizer");
  }
  base_lrs_ = {*optimizer.initial_lr()};
}

LRScheduler::LRScheduler(Optimizer& optimizer, Composite, std::string name)
    : optimizer_(optimizer), name_(std::move(name)) {}

void LRScheduler::initial_step() {
  step_count_ = 0;
  step();
}

void LRScheduler::step() {
  ++step_count_;
  ++last_epoch_;
  apply(get_lr());
}

void LRScheduler::step_to(int64_t epoch) {
  ++step_count_;
  last_epoch_ = epoch;
  const std::optional<double> closed = closed_form_lr();
  apply(closed ? *closed : get_lr());
}

void LRScheduler::apply(double lr) {
  optimizer_.set_lr(lr);
  last_lr_ = {optimizer_.lr()};
}

Tensor LRScheduler::number(double v) { return full({}, v, {.dtype = kFloat64}); }

double LRScheduler::number_of(const std::map<std::string, Tensor>& dict, const std::string& key) {
  return dict.at(key).to(kCPU, kFloat64).item<double>();
}

void LRScheduler::check_keys(const std::map<std::string, Tensor>& dict) const {
  const std::map<std::string, Tensor> expected = state_dict();
  for (const auto& [key, t] : dict) {
    TG_CHECK(expected.count(key), "[", name_, "] load_state_dict: unexpected key \"", key, "\"");
    TG_CHECK(t.defined() && t.numel() == 1, "[", name_, "] load_state_dict: entry \"", key,
             "\" should hold one number, got ", t.defined() ? "shape " + shape_str(t.sizes()) : "an undefined tensor");
  }
  for (const auto& [key, t] : expected)
    TG_CHECK(dict.count(key), "[", name_, "] load_state_dict: missing key \"", key, "\"");
}

std::map<std::string, Tensor> LRScheduler::state_dict() const {
  std::map<std::string, Tensor> out;
  out["last_epoch"] = number(static_cast<double>(last_epoch_));
  out["_step_count"] = number(static_cast<double>(step_count_));
  for (size_t i = 0; i < base_lrs_.size(); ++i) out["base_lrs." + std::to_string(i)] = number(base_lrs_[i]);
  for (size_t i = 0; i < last_lr_.size(); ++i) out["_last_lr." + std::to_string(i)] = number(last_lr_[i]);
  Fields f;
  // fields() hands out pointers for loading too; reading through them changes nothing.
  const_cast<LRScheduler*>(this)->fields(f);
  for (const auto& [name, value] : f.reals) out[name] = number(*value);
  for (const auto& [name, value] : f.ints) out[name] = number(static_cast<double>(*value));
  return out;
}

void LRScheduler::load_state_dict(const std::map<std::string, Tensor>& dict) {
  check_keys(dict);
  last_epoch_ = static_cast<int64_t>(number_of(dict, "last_epoch"));
  step_count_ = static_cast<int64_t>(number_of(dict, "_step_count"));
  for (size_t i = 0; i < base_lrs_.size(); ++i) base_lrs_[i] = number_of(dict, "base_lrs." + std::to_string(i));
  for (size_t i = 0; i < last_lr_.size(); ++i) last_lr_[i] = number_of(dict, "_last_lr." + std::to_string(i));
  Fields f;
  fields(f);
  for (const auto& [name, value] : f.reals) *value = number_of(dict, name);
  for (const auto& [name, value] : f.ints) *value = static_cast<int64_t>(number_of(dict, name));
}

}  // namespace tg::optim
