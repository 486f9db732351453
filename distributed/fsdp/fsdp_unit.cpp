// See Note [Fully sharded data parallel] in docs/fsdp.md.
#include "distributed/fsdp/fsdp_unit.h"

#include <algorithm>

#include "autograd/engine.h"
#include "distributed/collectives/collective_wait.h"
#include "distributed/fsdp/fsdp_gather.h"
#include "nn/module.h"
#include "ops/core/guarded_value.h"
#include "ops/factory/factory.h"
#include "ops/shape/join.h"
#include "ops/shape/view.h"
#include "tensor/check.h"
#include "tensor/grad_mode.h"
#include "tensor/shape.h"

namespace tg::distributed {

FullyShardedUnit::FullyShardedUnit(nn::Module& module, std::string type, std::shared_ptr<ProcessGroup> group,
                                   std::vector<std::pair<std::string, Tensor>> params, bool reshard_after_forward)
    : module_(module),
      type_(std::move(type)),
      group_(std::move(group)),
      reshard_after_forward_(reshard_after_forward),
      tree_(std::make_shared<ShardedTree>()) {
  for (auto& [name, p] : params) {
    names_.push_back(name);
    params_.push_back(p);
  }
  layout_ = ZeroLayout::build(params_, group_->world_size(), /*bucket_cap_mb=*/0.0);
  const Device device = params_.empty() ? group_->device() : params_[0].device();
  freed_ = std::make_shared<StorageImpl>(device, 0);
  freed_->invalidate("[fully_shard] a parameter of the sharded " + type_ +
                     " was read while its unit is resharded: its data exist only from the all-gather before the "
                     "unit's forward (or backward) to the reshard after it. Give the optimizer sharded_parameters() "
                     "and read the weights through full_state_dict()");
}

FullyShardedUnit::~FullyShardedUnit() = default;

void FullyShardedUnit::attach() {
  NoGradGuard no_grad;
  const int world = group_->world_size(), rank = group_->rank();
  for (size_t g = 0; g < layout_.groups.size(); ++g) {
    const ZeroGroup& zg = layout_.groups[g];
    Tensor flat = zeros({zg.flat_size()}, {.dtype = zg.dtype, .device = zg.device});
    bool trainable = false;
    for (size_t m = 0; m < zg.members.size(); ++m) {
      const Tensor& p = params_[zg.members[m]];
      flat.narrow(0, zg.offsets[m], zg.numel(m)).copy_(p.detach().reshape({-1}));
      trainable = trainable || p.requires_grad();
    }
    // Every rank starts from rank 0's values, as DistributedDataParallel's construction makes them.
    if (world > 1) group_->broadcast(flat, flat, 0);
    const int64_t size = layout_.shard_size(g);
    Tensor shard = flat.narrow(0, rank * size, size).clone();
    shard.requires_grad_(trainable);
    shards_.push_back(shard);
  }
  got_grad_.assign(params_.size(), false);
  std::weak_ptr<FullyShardedUnit> weak = weak_from_this();
  for (size_t k = 0; k < params_.size(); ++k) {
    if (!params_[k].requires_grad()) continue;
    ++expected_;
    params_[k].register_post_accumulate_grad_hook([weak, k](const Tensor&) {
      if (auto unit = weak.lock()) unit->on_accumulated(k);
    });
  }
  gathered_ = true;
  reshard();
}

void FullyShardedUnit::unshard(bool async) {
  if (traced_calls_ > 0 && !is_tracing()) end_trace();  // a trace that threw inside the unit's forward
  if (gathered_) {
    if (async) return;
    for (const Tensor& full : pending_gathers_) wait_for_collective(full);  // a prefetch's gathers
    pending_gathers_.clear();
    return;
  }
  TG_CHECK(!is_tracing(), "[fully_shard] the parameters of the sharded ", type_, " were to be gathered eagerly while "
           "compile() traces (full_state_dict, or a parameter read outside its unit's forward), which a traced graph "
           "would not replay: inside a compiled function a unit gathers only around its module's calls");
  NoGradGuard no_grad;
  for (size_t g = 0; g < layout_.groups.size(); ++g) {
    const ZeroGroup& zg = layout_.groups[g];
    const Tensor full = empty({zg.flat_size()}, {.dtype = zg.dtype, .device = zg.device});
    // Writes the storage directly (no version bump), so that tensors saved for backward in the forward
    // see the same version when the backward gathers again.
    group_->all_gather(shards_[g].detach(), full, async);
    if (async) pending_gathers_.push_back(full);
    for (size_t m = 0; m < zg.members.size(); ++m) {
      const Tensor& p = params_[zg.members[m]];
      p.impl()->set_geometry(full.impl()->storage(), zg.shapes[m], contiguous_strides(zg.shapes[m]),
                             full.storage_offset() + zg.offsets[m]);
    }
  }
  gathered_ = true;
}

void FullyShardedUnit::reshard() {
  pending_gathers_.clear();  // not read: what the gathers use stays referenced until they are done
  if (!gathered_) return;
  for (const Tensor& p : params_) {
    const Shape sizes = p.sizes();
    p.impl()->set_geometry(freed_, sizes, contiguous_strides(sizes), 0);
  }
  gathered_ = false;
}

void FullyShardedUnit::prefetch(int step) {
  if (!tree_->recorded) return;
  const auto& order = tree_->order;
  const auto it = std::find(order.begin(), order.end(), this);
  if (it == order.end()) return;
  const auto at = static_cast<int64_t>(it - order.begin()) + step;
  if (at < 0 || at >= static_cast<int64_t>(order.size())) return;
  // On NCCL the gather runs on its stream while this unit computes (FSDP2's prefetch); the next unit's
  // own hook waits for it.
  FullyShardedUnit* next = order[static_cast<size_t>(at)];
  // A unit whose backward is over (the root's, when its parameters are read last, as a head's) would
  // stay gathered, and the next forward would read those stale values instead of the updated shards.
  if (next->reduced_) return;
  next->unshard(/*async=*/true);
}

void FullyShardedUnit::pre_forward() {
  if (is_tracing()) {
    trace_unshard();
    return;
  }
  if (traced_calls_ > 0) end_trace();  // a trace that threw inside the unit's forward
  if (current_backward_sequence_nr() >= 0) {  // a checkpointed call recomputed by the backward
    unshard();
    return;
  }
  check_backward_finished();
  reduced_ = false;
  if (!tree_->recorded) {
    if (root_) tree_->order.clear();
    tree_->order.push_back(this);
  }
  unshard();
  prefetch(+1);
}

void FullyShardedUnit::post_forward(const Tensor& output) {
  if (is_tracing()) {
    if (traced_calls_ > 0 && --traced_calls_ == 0) end_trace();
    return;
  }
  if (current_backward_sequence_nr() >= 0) return;  // recomputation: the unit's backward reshards
  if (root_) tree_->recorded = true;
  const bool recording = is_grad_enabled() && output.defined() && output.requires_grad();
  if (recording) {
    std::weak_ptr<FullyShardedUnit> weak = weak_from_this();
    output.register_hook([weak](const Tensor& grad) {
      if (auto unit = weak.lock()) unit->pre_backward();
      return grad;
    });
  }
  const bool keep = recording && (root_ || !reshard_after_forward_);
  if (!keep) reshard();
}

void FullyShardedUnit::pre_backward() {
  unshard();
  prefetch(-1);
}

void FullyShardedUnit::on_accumulated(size_t index) {
  if (got_grad_[index]) return;
  got_grad_[index] = true;
  if (++arrived_ < expected_) return;
  reduce_gradients();
  reshard();
  reduced_ = true;
  std::fill(got_grad_.begin(), got_grad_.end(), false);
  arrived_ = 0;
}

void FullyShardedUnit::reduce_gradients() {
  NoGradGuard no_grad;
  const int world = group_->world_size();
  for (size_t g = 0; g < layout_.groups.size(); ++g) {
    const ZeroGroup& zg = layout_.groups[g];
    const TensorOptions options{.dtype = zg.dtype, .device = zg.device};
    TensorList parts;
    int64_t used = 0;
    for (size_t m = 0; m < zg.members.size(); ++m) {
      const Tensor grad = params_[zg.members[m]].grad();
      parts.push_back(grad.defined() ? grad.reshape({-1}) : zeros({zg.numel(m)}, options));
      used += zg.numel(m);
    }
    if (zg.flat_size() > used) parts.push_back(zeros({zg.flat_size() - used}, options));
    const Tensor flat = cat(parts).contiguous();
    Tensor mine = empty({zg.flat_size() / world}, options);
    group_->reduce_scatter(flat, mine, ReduceOp::Avg);
    const Tensor& shard = shards_[g];
    if (!shard.requires_grad()) continue;
    Tensor grad = shard.grad();
    if (grad.defined()) {
      grad.add_(mine);  // backwards accumulate, as into .grad
    } else {
      shard.set_grad(mine);
    }
  }
  for (const Tensor& p : params_) p.set_grad(Tensor());  // only the shards keep gradients
}

void FullyShardedUnit::check_backward_finished() {
  if (arrived_ == 0) return;
  std::string missing;
  for (size_t k = 0; k < params_.size(); ++k)
    if (params_[k].requires_grad() && !got_grad_[k]) missing += (missing.empty() ? "" : ", ") + names_[k];
  std::fill(got_grad_.begin(), got_grad_.end(), false);
  arrived_ = 0;
  TG_FAIL("[fully_shard] the last backward produced no gradient for ", missing, " of the sharded ", type_,
          ", so the unit's gradients were never reduce-scattered: every trainable parameter of a sharded unit "
          "must take part in the loss (or be frozen with requires_grad_(false) before fully_shard)");
}

void FullyShardedUnit::trace_unshard() {
  if (traced_calls_++ > 0) return;  // the module called inside its own call: its views are in place
  // Parameters still gathered by an eager forward whose backward has not run would be captured as
  // constants: free them (that backward's hook gathers them again).
  reshard();
  const bool recompute = reshard_after_forward_ && !root_;
  for (size_t g = 0; g < layout_.groups.size(); ++g) {
    const ZeroGroup& zg = layout_.groups[g];
    const Tensor full = gather_shard(shards_[g], group_, "fully_shard gather of the " + type_, recompute);
    for (size_t m = 0; m < zg.members.size(); ++m) {
      const Tensor& p = params_[zg.members[m]];
      const Tensor slice = view(narrow(full, 0, zg.offsets[m], zg.numel(m)), zg.shapes[m]);
      const bool trainable = p.requires_grad();
      p.impl()->set_geometry(slice.impl()->storage(), slice.sizes(), slice.strides(), slice.storage_offset());
      if (!trainable || !slice.requires_grad()) continue;
      // The handle becomes the slice for autograd too: the gradients of the ops that read it flow
      // through the slice and the gather's backward into the shard, as they would from the slice.
      AutogradMeta& meta = p.impl()->autograd();
      meta.grad_fn = slice.grad_fn();
      meta.output_nr = slice.output_nr();
    }
  }
}

void FullyShardedUnit::end_trace() {
  traced_calls_ = 0;
  for (const Tensor& p : params_) {
    if (AutogradMeta* meta = p.impl()->autograd_if_present()) {
      meta->grad_fn.reset();
      meta->output_nr = 0;
    }
  }
  gathered_ = true;  // the traced views, freed like gathered parameters
  reshard();
}

void FullyShardedUnit::set_nested(std::shared_ptr<ShardedTree> tree) {
  root_ = false;
  tree_ = std::move(tree);
}

}  // namespace tg::distributed
