// Module::state_dict / load_state_dict.

#include "nn/module.h"
#include "tensor/check.h"
#include "tensor/grad_mode.h"

namespace tg::nn {

std::map<std::string, Tensor> Module::state_dict() const {
  std::map<std::string, Tensor> out;
  for (auto& [name, t] : named_parameters()) out.emplace(name, t.detach());
  for (auto& [name, t] : named_buffers()) out.emplace(name, t.detach());
  return out;
}

void Module::load_state_dict(const std::map<std::string, Tensor>& dict, bool strict) {
  std::vector<NamedTensor> targets = named_parameters();
  for (auto& b : named_buffers()) targets.push_back(std::move(b));
  // Validate everything first, so that a failed load leaves the module as it was.
  std::map<std::string, bool> known;
  std::vector<std::string> missing;
  for (const auto& [name, t] : targets) {
    known[name] = true;
    auto it = dict.find(name);
    if (it == dict.end()) {
      missing.push_back(name);
      continue;
    }
    const Tensor& src = it->second;
    TG_CHECK(src.defined(), "[load_state_dict] entry \"", name, "\" is undefined");
    TG_CHECK(src.dtype() == t.dtype(), "[load_state_dict] entry \"", name, "\" has dtype ", dtype_name(src.dtype()),
             " but the module's tensor has dtype ", dtype_name(t.dtype()));
    TG_CHECK(src.sizes() == t.sizes(), "[load_state_dict] entry \"", name, "\" has shape ", shape_str(src.sizes()),
             " but the module's tensor has shape ", shape_str(t.sizes()));
  }
  if (strict) {
    TG_CHECK(missing.empty(), "[load_state_dict] missing key \"", missing.front(), "\" (", missing.size(),
             " missing in all)");
    for (const auto& [name, t] : dict) {
      TG_CHECK(known.count(name) != 0, "[load_state_dict] unexpected key \"", name, "\"");
    }
  }
  NoGradGuard no_grad;
  for (auto& [name, t] : targets) {
    auto it = dict.find(name);
    if (it != dict.end()) t.copy_(it->second);
  }
}

}  // namespace tg::nn
