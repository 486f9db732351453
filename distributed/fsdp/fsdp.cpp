// See Note [Fully sharded data parallel] in docs/fsdp.md.
#include "distributed/fsdp/fsdp.h"

#include <map>
#include <mutex>
#include <set>

#include "nn/module.h"
#include "tensor/check.h"
#include "tensor/grad_mode.h"

namespace tg::distributed {
namespace {

// The unit of each sharded module. Modules own their units (through their forward hooks); an entry
// whose unit is gone is stale (its module died, and another may live at the address now).
std::mutex g_units_mutex;
std::map<const nn::Module*, std::weak_ptr<FullyShardedUnit>>& units_by_module() {
  static std::map<const nn::Module*, std::weak_ptr<FullyShardedUnit>> units;
  return units;
}

}  // namespace

std::shared_ptr<FullyShardedUnit> sharded_unit(const nn::Module& module) {
  std::lock_guard<std::mutex> lock(g_units_mutex);
  auto& units = units_by_module();
  const auto it = units.find(&module);
  if (it == units.end()) return nullptr;
  std::shared_ptr<FullyShardedUnit> unit = it->second.lock();
  if (!unit || &unit->module() != &module) {
    units.erase(it);
    return nullptr;
  }
  return unit;
}

std::vector<std::shared_ptr<FullyShardedUnit>> sharded_units(nn::Module& root) {
  std::vector<std::shared_ptr<FullyShardedUnit>> out;
  for (const auto& [_, m] : root.named_modules())
    if (auto unit = sharded_unit(*m)) out.push_back(std::move(unit));
  return out;
}

std::shared_ptr<FullyShardedUnit> fully_shard(nn::Module& module, FullyShardOptions options) {
  const std::string type = module.type_name();
  std::shared_ptr<ProcessGroup> group = options.group ? options.group : default_group();
  TG_CHECK(!sharded_unit(module), "[fully_shard] this ", type, " is sharded already: call fully_shard once per module");
  // Units of submodules (sharded first, as FSDP2 asks) keep their parameters and join this tree.
  std::set<const TensorImpl*> managed;
  std::vector<std::shared_ptr<FullyShardedUnit>> nested;
  for (const auto& [name, m] : module.named_modules()) {
    if (name.empty()) continue;
    std::shared_ptr<FullyShardedUnit> unit = sharded_unit(*m);
    if (!unit) continue;
    TG_CHECK(&unit->group() == group.get(), "[fully_shard] submodule '", name, "' (", m->type_name(),
             ") is sharded over a group of ", unit->group().world_size(), " ranks, but this call shards the ", type,
             " over another group (of ", group->world_size(), " ranks): nested units must share one process group");
    nested.push_back(unit);
    for (const Tensor& p : unit->parameters()) managed.insert(p.impl());
  }
  std::vector<std::pair<std::string, Tensor>> params;
  for (const auto& [name, p] : module.named_parameters()) {
    if (!managed.insert(p.impl()).second) continue;  // a submodule's unit, or a tied parameter seen already
    TG_CHECK(group->world_size() == 1 || p.device() == group->device(), "[fully_shard] parameter '", name, "' of the ",
             type, " is on ", p.device().str(), " but the process group's device is ", group->device().str(),
             ": move the module there (module.to(device)) before sharding it");
    params.emplace_back(name, p);
  }
  auto unit = std::make_shared<FullyShardedUnit>(module, type, group, std::move(params), options.reshard_after_forward);
  unit->attach();  // a collective: every rank shards the same modules in the same order
  for (const auto& child : nested) child->set_nested(unit->tree());
  module.register_forward_pre_hook([unit](nn::Module&) { unit->pre_forward(); });
  module.register_forward_hook([unit](nn::Module&, const Tensor& output) { unit->post_forward(output); });
  std::lock_guard<std::mutex> lock(g_units_mutex);
  units_by_module()[&module] = unit;
  return unit;
}

TensorList sharded_parameters(nn::Module& root) {
  TensorList out;
  for (const auto& unit : sharded_units(root))
    for (const Tensor& shard : unit->sharded_parameters()) out.push_back(shard);
  return out;
}

std::map<std::string, Tensor> full_state_dict(nn::Module& root) {
  const auto units = sharded_units(root);
  std::vector<bool> was_gathered;
  for (const auto& unit : units) {
    was_gathered.push_back(unit->is_gathered());
    unit->unshard();
  }
  std::map<std::string, Tensor> dict;
  {
    NoGradGuard no_grad;
    for (const auto& [name, p] : root.named_parameters()) dict[name] = p.detach().clone();
    for (const auto& [name, b] : root.named_buffers()) dict[name] = b.detach().clone();
  }
  for (size_t i = 0; i < units.size(); ++i)
    if (!was_gathered[i]) units[i]->reshard();
  return dict;
}

void load_full_state_dict(nn::Module& root, const std::map<std::string, Tensor>& dict, bool strict) {
  const auto named_params = root.named_parameters();
  const auto named_buffers = root.named_buffers();
  std::set<std::string> known;
  auto check = [&](const std::string& name, const Tensor& t) {
    known.insert(name);
    const auto it = dict.find(name);
    TG_CHECK(it != dict.end(), "[load_full_state_dict] missing key \"", name, "\"");
    const Tensor& v = it->second;
    TG_CHECK(v.defined() && v.dtype() == t.dtype(), "[load_full_state_dict] \"", name, "\" has dtype ",
             v.defined() ? dtype_name(v.dtype()) : "undefined", ", expected ", dtype_name(t.dtype()));
    TG_CHECK(v.sizes() == t.sizes(), "[load_full_state_dict] \"", name, "\" has shape ", shape_str(v.sizes()),
             ", expected ", shape_str(t.sizes()));
  };
  for (const auto& [name, p] : named_params) check(name, p);
  for (const auto& [name, b] : named_buffers) check(name, b);
  if (strict) {
    for (const auto& [name, _] : dict)
      TG_CHECK(known.count(name), "[load_full_state_dict] unexpected key \"", name, "\"");
  }
  NoGradGuard no_grad;
  std::map<const TensorImpl*, std::string> name_of;
  for (const auto& [name, p] : named_params) name_of.emplace(p.impl(), name);
  std::set<const TensorImpl*> sharded;
  for (const auto& unit : sharded_units(root)) {
    const ZeroLayout& layout = unit->layout();
    const TensorList& params = unit->parameters();
    for (size_t g = 0; g < layout.groups.size(); ++g) {
      const ZeroGroup& zg = layout.groups[g];
      TensorList values;
      for (size_t member : zg.members) values.push_back(dict.at(name_of.at(params[member].impl())).to(zg.device));
      const Tensor& shard = unit->sharded_parameters()[g];
      shard.detach().copy_(layout.shard_of(g, unit->group().rank(), values, shard));
    }
    for (const Tensor& p : params) {
      sharded.insert(p.impl());
      if (unit->is_gathered()) p.detach().copy_(dict.at(name_of.at(p.impl())));  // keep the gathered copy current
    }
  }
  for (const auto& [name, p] : named_params)
    if (!sharded.count(p.impl())) p.detach().copy_(dict.at(name));
  for (const auto& [name, b] : named_buffers) b.detach().copy_(dict.at(name));
}

}  // namespace tg::distributed
