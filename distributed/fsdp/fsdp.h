// Fully sharded data parallelism (ZeRO stage 3), as PyTorch's FSDP2 `fully_shard`: each rank keeps
// 1/world_size of every parameter, and a sharded unit (a block, the root) gathers its parameters
// around its forward and its backward. See Note [Fully sharded data parallel] in docs/fsdp.md.
//
//   for (auto& [_, m] : gpt->named_modules())
//     if (m->type_name() == "GPTBlock") distributed::fully_shard(*m);
//   distributed::fully_shard(*gpt);
//   optim::AdamW opt(distributed::sharded_parameters(*gpt), {.lr = 3e-4});
//   gpt->loss(x, y).backward();  // gathers per block, reduce-scatters the gradients into the shards
//   opt.step();                  // updates the shards only
//
// Under compile() the gathers and the reduce-scatters of the gradients are traced as graph nodes.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "distributed/fsdp/fsdp_unit.h"

namespace tg::nn {
class Module;
}

namespace tg::distributed {

// Options of fully_shard().
struct FullyShardOptions {
  // The ranks to shard over (null: the default group). Nested units must share it.
  std::shared_ptr<ProcessGroup> group;
  // Free the gathered parameters after the forward (gathering them again for the backward): less
  // memory for one more all-gather. The root unit keeps them regardless while gradients are recorded,
  // since its backward comes first (as FSDP2 does). Under compile() the backward graph gathers again.
  bool reshard_after_forward = true;
};

// Shards the parameters of `module` that no sharded submodule manages (call it on the blocks first,
// then on the root). Rank 0's values are broadcast first, so every rank starts from the same model.
// From then on the module's parameters hold data only while their unit is gathered; an optimizer must
// be made over sharded_parameters(). Throws when `module` is sharded already, when a sharded
// submodule uses another group, or when a parameter is not on the group's device.
std::shared_ptr<FullyShardedUnit> fully_shard(nn::Module& module, FullyShardOptions options = {});

// The unit fully_shard() made for `module` (null when it is not sharded).
std::shared_ptr<FullyShardedUnit> sharded_unit(const nn::Module& module);

// The sharded units of `root` and its descendants, in named_modules() order (the same on every rank).
std::vector<std::shared_ptr<FullyShardedUnit>> sharded_units(nn::Module& root);

// The shard parameters of every unit under `root` (root included): what the optimizer updates. Their
// optimizer state is 1/world_size of the model's.
TensorList sharded_parameters(nn::Module& root);

// Every parameter and buffer of `root` by dotted name, gathered in full (new tensors): a collective,
// every rank calls it and gets the same dict. Loads into an unsharded model of the same shape.
std::map<std::string, Tensor> full_state_dict(nn::Module& root);

// Loads full parameters and buffers (a state_dict() of the unsharded model, or full_state_dict() of
// one sharded over any number of ranks) into `root`'s shards: each rank keeps its slice. Every entry is
// checked first (missing and, with strict, unexpected keys; dtype; shape); nothing changes on error.
// Not a collective.
void load_full_state_dict(nn::Module& root, const std::map<std::string, Tensor>& dict, bool strict = true);

}  // namespace tg::distributed
