// ZeroRedundancyOptimizer's state dicts: the wrapped optimizer's state over the shard parameters,
// turned into (and out of) the state of one optimizer over the whole model. See Note [Sharded
// optimizer] in docs/sharded_optimizer.md.
#include <set>

#include "distributed/collectives/collectives.h"
#include "distributed/zero/zero_optimizer.h"
#include "ops/factory/factory.h"
#include "tensor/check.h"
#include "tensor/grad_mode.h"

namespace tg::distributed {
namespace {

using Dict = std::map<std::string, Tensor>;

// "state.<i>.<field>" split into i and field; false for other keys.
bool parse_state_key(const std::string& key, size_t& index, std::string& field) {
  if (key.rfind("state.", 0) != 0) return false;
  const size_t dot = key.find('.', 6);
  if (dot == std::string::npos || dot == 6) return false;
  const std::string digits = key.substr(6, dot - 6);
  if (digits.find_first_not_of("0123456789") != std::string::npos || digits.size() > 9) return false;
  index = std::stoul(digits);
  field = key.substr(dot + 1);
  return !field.empty();
}

// Per-step counters are one number for the whole shard (every element of a shard has taken the same
// steps); every other field holds one value per element.
bool is_scalar_field(const std::string& field) { return field == "step"; }

std::string key_of(size_t index, const std::string& field) { return "state." + std::to_string(index) + "." + field; }

}  // namespace

Dict ZeroRedundancyOptimizer::full_dict(const std::vector<Dict>& shards, const ZeroLayout& layout) const {
  Dict out;
  for (const auto& [key, t] : shards[0])
    if (key.rfind("param_groups.", 0) == 0) out[key] = t;
  if (initial_lr_) out["param_groups.0.initial_lr"] = full({}, *initial_lr_, {.dtype = kFloat64});
  for (size_t g = 0; g < layout.groups.size(); ++g) {
    const ZeroGroup& group = layout.groups[g];
    std::set<std::string> fields;
    for (const auto& [key, t] : shards[0]) {
      size_t index = 0;
      std::string field;
      if (parse_state_key(key, index, field) && index == g) fields.insert(field);
    }
    for (const std::string& field : fields) {
      const std::string key = key_of(g, field);
      if (is_scalar_field(field)) {
        for (size_t k : group.members) out[key_of(k, field)] = shards[0].at(key);
        continue;
      }
      TensorList parts;
      for (size_t r = 0; r < shards.size(); ++r) {
        auto it = shards[r].find(key);
        TG_CHECK(it != shards[r].end(), "[ZeroRedundancyOptimizer] rank ", r, "'s state lacks \"", key,
                 "\", which rank 0's has");
        parts.push_back(it->second);
      }
      const TensorList members = layout.unshard(g, parts);
      for (size_t m = 0; m < group.members.size(); ++m) out[key_of(group.members[m], field)] = members[m];
    }
  }
  return out;
}

Dict ZeroRedundancyOptimizer::shard_dict(const Dict& full) const {
  Dict out;
  std::vector<std::set<std::string>> fields(model_params_.size());
  for (const auto& [key, t] : full) {
    if (key.rfind("param_groups.", 0) == 0) {
      out[key] = t;
      continue;
    }
    size_t index = 0;
    std::string field;
    TG_CHECK(parse_state_key(key, index, field) && index < model_params_.size(), "[load_state_dict] unexpected key \"",
             key, "\" for an optimizer of ", model_params_.size(), " parameters");
    TG_CHECK(t.defined(), "[load_state_dict] entry \"", key, "\" is undefined");
    fields[index].insert(field);
  }
  for (size_t g = 0; g < layout_.groups.size(); ++g) {
    const ZeroGroup& group = layout_.groups[g];
    const size_t first = group.members[0];
    for (size_t k : group.members)
      TG_CHECK(fields[k] == fields[first], "[load_state_dict] parameters ", first, " and ", k,
               " (both ", dtype_name(group.dtype), ") hold different optimizer state: a sharded optimizer keeps one "
               "state for all the parameters of a dtype, so they must all have it (or none)");
    for (const std::string& field : fields[first]) {
      if (is_scalar_field(field)) {
        const Tensor& t0 = full.at(key_of(first, field));
        TG_CHECK(t0.numel() == 1, "[load_state_dict] entry \"", key_of(first, field), "\" has shape ",
                 shape_str(t0.sizes()), "; expected one number");
        const double v0 = t0.to(kCPU, kFloat64).item<double>();
        for (size_t k : group.members) {
          const Tensor& t = full.at(key_of(k, field));
          TG_CHECK(t.numel() == 1 && t.to(kCPU, kFloat64).item<double>() == v0, "[load_state_dict] entry \"",
                   key_of(k, field), "\" differs from \"", key_of(first, field),
                   "\": a sharded optimizer counts one step for all the parameters of a dtype");
        }
        out[key_of(g, field)] = t0;
        continue;
      }
      TensorList values;
      for (size_t m = 0; m < group.members.size(); ++m) {
        const size_t k = group.members[m];
        const Tensor& t = full.at(key_of(k, field));
        TG_CHECK(t.dtype() == group.dtype, "[load_state_dict] entry \"", key_of(k, field), "\" has dtype ",
                 dtype_name(t.dtype()), " but the parameter has dtype ", dtype_name(group.dtype));
        TG_CHECK(t.sizes() == group.shapes[m], "[load_state_dict] entry \"", key_of(k, field), "\" has shape ",
                 shape_str(t.sizes()), " but the parameter has shape ", shape_str(group.shapes[m]));
        values.push_back(t);
      }
      out[key_of(g, field)] = layout_.shard_of(g, group_->rank(), values, shard_params_[g]);
    }
  }
  return out;
}

void ZeroRedundancyOptimizer::consolidate_state_dict(int to) {
  const int world = group_->world_size();
  TG_CHECK(to >= 0 && to < world, "[consolidate_state_dict] rank ", to, " is not a rank of a group of ", world);
  NoGradGuard no_grad;
  const Dict local = inner_->state_dict();
  std::vector<Dict> shards(static_cast<size_t>(world));
  // Every rank holds the same keys (the same steps were taken everywhere): gather them in key order.
  for (const auto& [key, t] : local) {
    size_t index = 0;
    std::string field;
    if (!parse_state_key(key, index, field) || is_scalar_field(field) || world == 1) {
      for (Dict& d : shards) d[key] = t;
      continue;
    }
    const Tensor gathered = all_gather(t.contiguous(), group_);
    for (int r = 0; r < world; ++r) shards[static_cast<size_t>(r)][key] = gathered[r];
  }
  consolidated_ = group_->rank() == to ? full_dict(shards, layout_) : Dict{};
}

Dict ZeroRedundancyOptimizer::state_dict() const {
  if (group_->world_size() == 1) return full_dict({inner_->state_dict()}, layout_);
  TG_CHECK(!consolidated_.empty(), "[ZeroRedundancyOptimizer] Optimizer state has not been consolidated on this rank (",
           group_->rank(), "). Please call `consolidate_state_dict(to)` on all ranks beforehand if you meant to save "
           "the global state, or save_sharded() for a checkpoint of shards");
  return consolidated_;
}

void ZeroRedundancyOptimizer::load_state_dict(const Dict& dict) {
  const Dict shard = shard_dict(dict);  // every entry checked against the parameters
  std::optional<double> initial_lr;
  if (auto it = dict.find("param_groups.0.initial_lr"); it != dict.end() && it->second.defined() &&
                                                         it->second.numel() == 1)
    initial_lr = it->second.to(kCPU, kFloat64).item<double>();
  inner_->load_state_dict(shard);  // checks the hyperparameters, then applies
  lr_.set(inner_->lr());
  if (initial_lr) set_initial_lr(*initial_lr);
  consolidated_.clear();
}

}  // namespace tg::distributed
