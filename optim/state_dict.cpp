// Optimizer state_dict / load_state_dict (Adam, AdamW, SGD) with PyTorch's entry names.
// See Note [Fused optimizer steps] in docs/fused_optimizers.md.
#include <optional>
#include <set>

#include "ops/factory/factory.h"
#include "optim/adam.h"
#include "optim/sgd.h"
#include "tensor/check.h"
#include "tensor/grad_mode.h"

namespace tg::optim {
namespace {

using Dict = std::map<std::string, Tensor>;

Tensor number(double v) { return full({}, v, {.dtype = kFloat64}); }

double read_number(const Dict& dict, const std::string& key) {
  auto it = dict.find(key);
  TG_CHECK(it != dict.end(), "[load_state_dict] missing key \"", key, "\"");
  TG_CHECK(it->second.defined() && it->second.numel() == 1, "[load_state_dict] entry \"", key,
           "\" should hold one number");
  return it->second.to(kCPU, kFloat64).item<double>();
}

// The learning rate a scheduler recorded, when the dict has one.
std::optional<double> read_initial_lr(const Dict& dict) {
  if (!dict.count("param_groups.0.initial_lr")) return std::nullopt;
  return read_number(dict, "param_groups.0.initial_lr");
}

// Every key must be one of `groups` ("param_groups.0.<name>") or "state.<i>.<field>" with i a
// parameter index and field one of `fields`.
void check_keys(const Dict& dict, size_t params, const std::set<std::string>& groups,
                const std::set<std::string>& fields) {
  for (const auto& [key, t] : dict) {
    if (key.rfind("param_groups.0.", 0) == 0 && groups.count(key.substr(15))) continue;
    size_t i = 0;
    std::string field;
    const bool ok = key.rfind("state.", 0) == 0 && [&] {
      const size_t dot = key.find('.', 6);
      if (dot == std::string::npos) return false;
      try {
        size_t used = 0;
        i = std::stoul(key.substr(6, dot - 6), &used);
        if (used != dot - 6) return false;
      } catch (const std::exception&) {
        return false;
      }
      field = key.substr(dot + 1);
      return true;
    }();
    TG_CHECK(ok && i < params && fields.count(field), "[load_state_dict] unexpected key \"", key, "\"");
  }
}

}  // namespace

const Tensor& Optimizer::checked_entry(const Dict& dict, const std::string& key, const Tensor& like) {
  auto it = dict.find(key);
  TG_CHECK(it != dict.end(), "[load_state_dict] missing key \"", key, "\"");
  const Tensor& t = it->second;
  TG_CHECK(t.defined(), "[load_state_dict] entry \"", key, "\" is undefined");
  if (!like.defined()) {
    TG_CHECK(t.numel() == 1, "[load_state_dict] entry \"", key, "\" has shape ", shape_str(t.sizes()),
             "; expected one number");
    return t;
  }
  TG_CHECK(t.dtype() == like.dtype(), "[load_state_dict] entry \"", key, "\" has dtype ", dtype_name(t.dtype()),
           " but the parameter has dtype ", dtype_name(like.dtype()));
  TG_CHECK(t.sizes() == like.sizes(), "[load_state_dict] entry \"", key, "\" has shape ", shape_str(t.sizes()),
           " but the parameter has shape ", shape_str(like.sizes()));
  return t;
}

void Optimizer::assign_state(Tensor& state, const Tensor& src, const Tensor& p) {
  NoGradGuard no_grad;
  if (state.defined() && state.device() == p.device()) {
    state.copy_(src);
  } else {
    state = empty(p.sizes(), {.dtype = p.dtype(), .device = p.device()});
    state.copy_(src);
  }
}

std::map<std::string, Tensor> Adam::state_dict() const {
  Dict out;
  out["param_groups.0.lr"] = number(lr_.peek());
  if (initial_lr_) out["param_groups.0.initial_lr"] = number(*initial_lr_);  // set by a scheduler, as in PyTorch
  out["param_groups.0.beta1"] = number(beta1_.peek());
  out["param_groups.0.beta2"] = number(beta2_.peek());
  out["param_groups.0.eps"] = number(eps_.peek());
  out["param_groups.0.weight_decay"] = number(weight_decay_.peek());
  for (size_t i = 0; i < params_.size(); ++i) {
    // Captured (replayed) updates count on the device only; the host count is the one of eager updates.
    const bool on_device = i < device_steps_.size() && device_steps_[i].defined();
    const double t = on_device ? device_steps_[i].to(kCPU, kFloat64).item<double>()
                               : static_cast<double>(param_steps_[i]);
    if (t == 0) continue;
    const std::string prefix = "state." + std::to_string(i) + ".";
    out[prefix + "step"] = full({}, t, {.dtype = kFloat32});
    out[prefix + "exp_avg"] = exp_avg_[i].detach();
    out[prefix + "exp_avg_sq"] = exp_avg_sq_[i].detach();
  }
  return out;
}

void Adam::load_state_dict(const Dict& dict) {
  check_keys(dict, params_.size(), {"lr", "initial_lr", "beta1", "beta2", "eps", "weight_decay"},
             {"step", "exp_avg", "exp_avg_sq"});
  AdamOptions o;
  o.lr = read_number(dict, "param_groups.0.lr");
  const std::optional<double> initial_lr = read_initial_lr(dict);
  o.beta1 = read_number(dict, "param_groups.0.beta1");
  o.beta2 = read_number(dict, "param_groups.0.beta2");
  o.eps = read_number(dict, "param_groups.0.eps");
  o.weight_decay = read_number(dict, "param_groups.0.weight_decay");
  std::vector<int64_t> steps(params_.size(), 0);
  for (size_t i = 0; i < params_.size(); ++i) {
    const std::string prefix = "state." + std::to_string(i) + ".";
    const bool has = dict.count(prefix + "step") || dict.count(prefix + "exp_avg") || dict.count(prefix + "exp_avg_sq");
    if (!has) continue;
    const double t = checked_entry(dict, prefix + "step", Tensor()).to(kCPU, kFloat64).item<double>();
    TG_CHECK(t >= 1 && t == static_cast<double>(static_cast<int64_t>(t)), "[load_state_dict] entry \"", prefix,
             "step\" is ", t, "; expected a positive whole number");
    steps[i] = static_cast<int64_t>(t);
    checked_entry(dict, prefix + "exp_avg", params_[i]);
    checked_entry(dict, prefix + "exp_avg_sq", params_[i]);
  }
  TG_CHECK(o.beta1 >= 0.0 && o.beta1 < 1.0 && o.beta2 >= 0.0 && o.beta2 < 1.0 && o.eps >= 0.0 &&
               o.weight_decay >= 0.0 && o.lr >= 0.0,
           "[load_state_dict] invalid hyperparameters: lr=", o.lr, " betas=(", o.beta1, ", ", o.beta2, ") eps=", o.eps,
           " weight_decay=", o.weight_decay);
  // Everything checked: apply (in place on the device copies, so compiled steps follow).
  set_lr(o.lr);
  set_betas(o.beta1, o.beta2);
  set_eps(o.eps);
  set_weight_decay(o.weight_decay);
  if (initial_lr) set_initial_lr(*initial_lr);
  NoGradGuard no_grad;
  step_ = 0;
  for (size_t i = 0; i < params_.size(); ++i) {
    const std::string prefix = "state." + std::to_string(i) + ".";
    param_steps_[i] = steps[i];
    step_ = std::max(step_, steps[i]);
    if (steps[i] == 0) {
      // No state for this parameter: as before its first update (zeros behave as fresh moments).
      if (exp_avg_[i].defined()) exp_avg_[i].zero_();
      if (exp_avg_sq_[i].defined()) exp_avg_sq_[i].zero_();
    } else {
      assign_state(exp_avg_[i], dict.at(prefix + "exp_avg"), params_[i]);
      assign_state(exp_avg_sq_[i], dict.at(prefix + "exp_avg_sq"), params_[i]);
    }
    if (i < device_steps_.size() && device_steps_[i].defined()) device_steps_[i].fill_(static_cast<double>(steps[i]));
  }
}

std::map<std::string, Tensor> SGD::state_dict() const {
  Dict out;
  out["param_groups.0.lr"] = number(lr_.peek());
  if (initial_lr_) out["param_groups.0.initial_lr"] = number(*initial_lr_);  // set by a scheduler, as in PyTorch
  out["param_groups.0.momentum"] = number(momentum_.peek());
  out["param_groups.0.dampening"] = number(dampening_.peek());
  out["param_groups.0.nesterov"] = number(nesterov_.peek() ? 1.0 : 0.0);
  out["param_groups.0.weight_decay"] = number(weight_decay_.peek());
  for (size_t i = 0; i < params_.size(); ++i) {
    if (buffers_[i].defined()) out["state." + std::to_string(i) + ".momentum_buffer"] = buffers_[i].detach();
  }
  return out;
}

void SGD::load_state_dict(const Dict& dict) {
  check_keys(dict, params_.size(), {"lr", "initial_lr", "momentum", "dampening", "nesterov", "weight_decay"},
             {"momentum_buffer"});
  SGDOptions o;
  o.lr = read_number(dict, "param_groups.0.lr");
  const std::optional<double> initial_lr = read_initial_lr(dict);
  o.momentum = read_number(dict, "param_groups.0.momentum");
  o.dampening = read_number(dict, "param_groups.0.dampening");
  o.nesterov = read_number(dict, "param_groups.0.nesterov") != 0.0;
  o.weight_decay = read_number(dict, "param_groups.0.weight_decay");
  for (size_t i = 0; i < params_.size(); ++i) {
    const std::string key = "state." + std::to_string(i) + ".momentum_buffer";
    if (dict.count(key)) checked_entry(dict, key, params_[i]);
  }
  TG_CHECK(o.lr >= 0.0 && o.momentum >= 0.0 && o.weight_decay >= 0.0 &&
               (!o.nesterov || (o.momentum > 0.0 && o.dampening == 0.0)),
           "[load_state_dict] invalid hyperparameters: lr=", o.lr, " momentum=", o.momentum,
           " dampening=", o.dampening, " nesterov=", o.nesterov, " weight_decay=", o.weight_decay);
  // Everything checked: apply (in place on the device copies, so compiled steps follow). nesterov
  // is structural: set before the values it constrains.
  nesterov_.set(o.nesterov);
  set_lr(o.lr);
  set_momentum(o.momentum);
  set_dampening(o.dampening);
  set_weight_decay(o.weight_decay);
  if (initial_lr) set_initial_lr(*initial_lr);
  for (size_t i = 0; i < params_.size(); ++i) {
    const std::string key = "state." + std::to_string(i) + ".momentum_buffer";
    if (dict.count(key)) {
      assign_state(buffers_[i], dict.at(key), params_[i]);
    } else {
      buffers_[i] = Tensor();  // the next update starts the buffer from the gradient, as a first step does
    }
  }
}

}  // namespace tg::optim
