// See Note [Sharded optimizer] in docs/sharded_optimizer.md.
#include "distributed/zero/sharded_gradient_buckets.h"

#include <algorithm>
#include <memory>

#include "distributed/collectives/collectives.h"
#include "distributed/zero/zero_optimizer.h"
#include "graphs/passes/schedule_collectives.h"
#include "ops/factory/factory.h"
#include "ops/shape/join.h"
#include "tensor/check.h"
#include "tensor/grad_mode.h"

namespace tg::distributed {

ShardedGradientBuckets::ShardedGradientBuckets(ZeroRedundancyOptimizer& owner)
    : owner_(owner), slot_of_(owner.model_params().size()), got_grad_(owner.model_params().size(), false) {
  // Buckets in the order the backward completes them: by their first member, which is the latest
  // registered parameter of the bucket (groups lay parameters out in reverse registration order).
  const ZeroLayout& layout = owner_.layout();
  for (size_t g = 0; g < layout.groups.size(); ++g)
    for (size_t b = 0; b < layout.groups[g].buckets.size(); ++b) order_.emplace_back(g, b);
  auto first_member = [&](const std::pair<size_t, size_t>& gb) {
    const ZeroGroup& g = layout.groups[gb.first];
    for (size_t m = 0; m < g.members.size(); ++m)
      if (g.bucket_of[m] == gb.second) return g.members[m];
    return size_t{0};
  };
  std::stable_sort(order_.begin(), order_.end(),
                   [&](const auto& a, const auto& b) { return first_member(a) > first_member(b); });
  sizes_.assign(order_.size(), 0);
  for (size_t s = 0; s < order_.size(); ++s) {
    const ZeroGroup& g = layout.groups[order_[s].first];
    for (size_t m = 0; m < g.members.size(); ++m) {
      if (g.bucket_of[m] != order_[s].second) continue;
      slot_of_[g.members[m]] = s;
      ++sizes_[s];
    }
  }
  ready_.assign(order_.size(), 0);
  const TensorList& params = owner_.model_params();
  for (size_t k = 0; k < params.size(); ++k) index_of_.emplace(params[k].impl(), k);
}

void ShardedGradientBuckets::attach() {
  std::weak_ptr<ShardedGradientBuckets> weak = owner_.reducer_;
  const TensorList& params = owner_.model_params();
  for (size_t k = 0; k < params.size(); ++k) {
    params[k].impl()->autograd().grad_reducer = owner_.reducer_;
    params[k].register_post_accumulate_grad_hook([weak, k](const Tensor&) {
      if (auto buckets = weak.lock()) buckets->on_accumulated(k);
    });
  }
}

void ShardedGradientBuckets::detach() {
  attached_ = false;
  in_flight_.clear();  // the collectives' memory stays referenced until they are done
  // The parameters may outlive the optimizer (the model goes on): they stop reducing, and compiled
  // graphs that folded this reducer in recompile (their shard parameters are gone).
  for (const Tensor& p : owner_.model_params())
    if (AutogradMeta* meta = p.impl()->autograd_if_present(); meta && meta->grad_reducer.get() == this)
      meta->grad_reducer.reset();
}

void ShardedGradientBuckets::on_accumulated(size_t index) {
  if (!attached_ || got_grad_[index]) return;  // a second accumulation in one backward: the bucket reads the final .grad
  got_grad_[index] = true;
  ++ready_[slot_of_[index]];
  launch_ready();
}

Tensor ShardedGradientBuckets::reduce_bucket(size_t slot, const TensorList& member_grads) const {
  const auto [gi, b] = order_[slot];
  const ZeroGroup& g = owner_.layout().groups[gi];
  const ZeroBucket& bucket = g.buckets[b];
  const int world = owner_.layout().world_size;
  TensorList parts;
  int64_t used = 0;
  size_t j = 0;
  for (size_t m = 0; m < g.members.size(); ++m) {
    if (g.bucket_of[m] != b) continue;
    const Tensor& grad = member_grads[j++];
    TG_CHECK(!grad.defined() || (grad.numel() == g.numel(m) && grad.dtype() == g.dtype),
             "[ZeroRedundancyOptimizer] the gradient of parameter ", g.members[m], " is ", dtype_name(grad.dtype()),
             " of shape ", shape_str(grad.sizes()), ", expected ", dtype_name(g.dtype), " of shape ",
             shape_str(g.shapes[m]));
    // A parameter without a gradient takes its place in the message as zeros, so every rank sends
    // the same bytes.
    parts.push_back(grad.defined() ? grad.reshape({-1}) : zeros({g.numel(m)}, {.dtype = g.dtype, .device = g.device}));
    used += g.numel(m);
  }
  if (bucket.size > used) parts.push_back(zeros({bucket.size - used}, {.dtype = g.dtype, .device = g.device}));
  const int64_t block = bucket.size / world;
  // Traced, the node keeps the context, and reads the step counter at every run.
  const CollectiveContextScope context({"ZeRO reduce-scatter, " + owner_.describe_bucket(gi, b), step_});
  return reduce_scatter_async(cat(parts).view({world, block}), ReduceOp::Avg, owner_.group_);
}

void ShardedGradientBuckets::accumulate_oldest() {
  NoGradGuard no_grad;
  InFlight f = std::move(in_flight_.front());
  in_flight_.pop_front();
  const Tensor mine = collective_wait(f.block);
  const Tensor& shard = owner_.shard_params_[f.group];
  Tensor grad = shard.grad();
  if (!grad.defined()) {
    grad = zeros(shard.sizes(), {.dtype = shard.dtype(), .device = shard.device()});
    shard.set_grad(grad);
  }
  grad.narrow(0, f.offset, mine.numel()).add_(mine);
}

void ShardedGradientBuckets::launch_ready() {
  NoGradGuard no_grad;
  const ZeroLayout& layout = owner_.layout();
  const TensorList& params = owner_.model_params();
  while (next_ < order_.size() && ready_[next_] == sizes_[next_]) {
    const auto [gi, b] = order_[next_];
    const ZeroGroup& g = layout.groups[gi];
    TensorList members, grads;
    for (size_t m = 0; m < g.members.size(); ++m) {
      if (g.bucket_of[m] != b) continue;
      members.push_back(params[g.members[m]]);
      grads.push_back(members.back().grad());
    }
    if (next_ == 0) ++*step_;
    in_flight_.push_back({gi, layout.shard_offset(gi, b), reduce_bucket(next_, grads)});
    for (const Tensor& p : members) p.set_grad(Tensor());  // only the shard stays
    ++next_;
    // The reduction of the bucket issued two before overlapped the gradients computed since.
    while (in_flight_.size() > graphs::kCollectivesInFlight) accumulate_oldest();
  }
  if (next_ == order_.size()) {
    while (!in_flight_.empty()) accumulate_oldest();
    std::fill(ready_.begin(), ready_.end(), 0);
    std::fill(got_grad_.begin(), got_grad_.end(), false);
    next_ = 0;
  }
}

bool ShardedGradientBuckets::covers(const std::vector<std::shared_ptr<TensorImpl>>& leaves) const {
  std::vector<bool> seen(index_of_.size(), false);
  size_t count = 0;
  for (const auto& leaf : leaves) {
    auto it = index_of_.find(leaf.get());
    if (it == index_of_.end() || seen[it->second]) continue;
    seen[it->second] = true;
    ++count;
  }
  return count == index_of_.size();
}

TensorList ShardedGradientBuckets::reduce(const std::vector<std::shared_ptr<TensorImpl>>&, const TensorList&) {
  TG_FAIL("[ZeroRedundancyOptimizer] stage 2 keeps the reduced gradients in its shard parameters: reduce them with "
          "reduce_elsewhere(), which delivers them there");
}

TensorList ShardedGradientBuckets::reduce_elsewhere(const std::vector<std::shared_ptr<TensorImpl>>& leaves,
                                                    const TensorList& grads,
                                                    std::vector<std::pair<Tensor, Tensor>>& elsewhere) {
  TG_CHECK(leaves.size() == grads.size(), "[ZeroRedundancyOptimizer] got ", grads.size(), " gradients for ",
           leaves.size(), " parameters");
  // A graph holding only some parameters' gradients (the model split over several functions, or
  // partly eager) leaves the buckets to the hooks, which reduce each once all its gradients exist.
  if (!covers(leaves)) return grads;
  NoGradGuard no_grad;
  const ZeroLayout& layout = owner_.layout();
  TensorList by_param(index_of_.size());
  for (size_t j = 0; j < leaves.size(); ++j) by_param[index_of_.at(leaves[j].get())] = grads[j];
  // The buckets in the hooks' order, the same on every rank; the graph's scheduler then issues each
  // as soon as its gradients exist.
  std::vector<TensorList> blocks(layout.groups.size());
  for (size_t gi = 0; gi < layout.groups.size(); ++gi) blocks[gi].resize(layout.groups[gi].buckets.size());
  for (size_t slot = 0; slot < order_.size(); ++slot) {
    const auto [gi, b] = order_[slot];
    const ZeroGroup& g = layout.groups[gi];
    TensorList member_grads;
    for (size_t m = 0; m < g.members.size(); ++m)
      if (g.bucket_of[m] == b) member_grads.push_back(by_param[g.members[m]]);
    blocks[gi][b] = reduce_bucket(slot, member_grads);
  }
  // Read where the shard gradients are assembled; the scheduling pass moves each wait to before the
  // reduction issued two later, so two buckets stay in flight while the backward goes on.
  for (const auto& [gi, b] : order_) blocks[gi][b] = collective_wait(blocks[gi][b]);
  // Each group's shard gradient: its blocks end to end (the shard's layout), accumulated into the
  // shard parameter's .grad by the backward as any leaf gradient is.
  for (size_t gi = 0; gi < layout.groups.size(); ++gi)
    elsewhere.emplace_back(owner_.shard_params_[gi], blocks[gi].size() == 1 ? blocks[gi][0] : cat(blocks[gi]));
  return TensorList(leaves.size());  // the full gradients are not kept
}

void ShardedGradientBuckets::expect_reduced(const std::vector<std::shared_ptr<TensorImpl>>& leaves) {
  // The graph's reduce_scatters name this step in their messages, as an eager backward's would.
  if (attached_ && !leaves.empty() && covers(leaves)) ++*step_;
}

void ShardedGradientBuckets::check_finished() {
  const bool started = std::any_of(ready_.begin(), ready_.end(), [](size_t r) { return r > 0; });
  if (!started) return;
  while (!in_flight_.empty()) accumulate_oldest();  // the buckets reduced so far count, as they went out
  std::string missing;
  for (size_t k = 0; k < got_grad_.size(); ++k)
    if (!got_grad_[k]) missing += (missing.empty() ? "" : ", ") + std::to_string(k);
  std::fill(ready_.begin(), ready_.end(), 0);
  std::fill(got_grad_.begin(), got_grad_.end(), false);
  next_ = 0;
  TG_FAIL("[ZeroRedundancyOptimizer] the last backward produced no gradient for parameter(s) ", missing,
          ", so their buckets were never reduced: at stage 2 every parameter must take part in the loss (or be left "
          "out of the optimizer)");
}

}  // namespace tg::distributed
