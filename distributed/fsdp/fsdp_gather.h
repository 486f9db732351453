// The all-gather of a fully sharded unit's flat shard as a traced, differentiable op: what a unit's
// forward hook records under compile() (Note [Fully sharded data parallel] in docs/fsdp.md).
#pragma once

#include <memory>
#include <string>

#include "distributed/collectives/process_group.h"

namespace tg::distributed {

// The flat tensor of world_size * shard.numel() elements holding every rank's `shard` (rank r's in
// block r): an asynchronous gather on NCCL and its collective_wait. Its gradient is reduce-scattered
// with ReduceOp::Avg, as the eager unit reduces: rank r's shard receives block r of the average over
// ranks. `label` names the collective if it stalls.
// `recompute`: the partitioner may run the gather again in the backward instead of saving its
// result (reshard_after_forward under compile).
Tensor gather_shard(const Tensor& shard, std::shared_ptr<ProcessGroup> group, std::string label, bool recompute);

}  // namespace tg::distributed
