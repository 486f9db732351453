// See Note [Sharded optimizer] in docs/sharded_optimizer.md.
#include "distributed/sharded_gradient_buckets.h"

#include <algorithm>
#include <memory>

#include "autograd/grad_mode.h"
#include "distributed/collectives.h"
#include "distributed/zero_optimizer.h"
#include "ops/factory.h"
#include "ops/join.h"
#include "tensor/check.h"

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
}

void ShardedGradientBuckets::attach() {
  std::weak_ptr<ShardedGradientBuckets> weak = owner_.reducer_;
  const TensorList& params = owner_.model_params();
  for (size_t k = 0; k < params.size(); ++k) {
    params[k].register_post_accumulate_grad_hook([weak, k](const Tensor&) {
      if (auto buckets = weak.lock()) buckets->on_accumulated(k);
    });
  }
}

void ShardedGradientBuckets::on_accumulated(size_t index) {
  if (!attached_ || got_grad_[index]) return;  // a second accumulation in one backward: the bucket reads the final .grad
  got_grad_[index] = true;
  ++ready_[slot_of_[index]];
  launch_ready();
}

void ShardedGradientBuckets::launch_ready() {
  NoGradGuard no_grad;
  const ZeroLayout& layout = owner_.layout();
  const TensorList& params = owner_.model_params();
  const int world = layout.world_size;
  while (next_ < order_.size() && ready_[next_] == sizes_[next_]) {
    const auto [gi, b] = order_[next_];
    const ZeroGroup& g = layout.groups[gi];
    const ZeroBucket& bucket = g.buckets[b];
    TensorList parts, members;
    int64_t used = 0;
    for (size_t m = 0; m < g.members.size(); ++m) {
      if (g.bucket_of[m] != b) continue;
      members.push_back(params[g.members[m]]);
      parts.push_back(members.back().grad().reshape({-1}));
      used += g.numel(m);
    }
    if (bucket.size > used) parts.push_back(zeros({bucket.size - used}, {.dtype = g.dtype, .device = g.device}));
    const int64_t block = bucket.size / world;
    if (next_ == 0) ++*step_;
    const CollectiveContextScope context({"ZeRO reduce-scatter, " + owner_.describe_bucket(gi, b), step_});
    const Tensor mine = reduce_scatter(cat(parts).view({world, block}), ReduceOp::Avg, owner_.group_);
    const Tensor& shard = owner_.shard_params_[gi];
    Tensor grad = shard.grad();
    if (!grad.defined()) {
      grad = zeros(shard.sizes(), {.dtype = shard.dtype(), .device = shard.device()});
      shard.set_grad(grad);
    }
    grad.narrow(0, layout.shard_offset(gi, b), block).add_(mine);
    for (const Tensor& p : members) p.set_grad(Tensor());  // only the shard stays
    ++next_;
  }
  if (next_ == order_.size()) {
    std::fill(ready_.begin(), ready_.end(), 0);
    std::fill(got_grad_.begin(), got_grad_.end(), false);
    next_ = 0;
  }
}

void ShardedGradientBuckets::check_finished() {
  const bool started = std::any_of(ready_.begin(), ready_.end(), [](size_t r) { return r > 0; });
  if (!started) return;
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
