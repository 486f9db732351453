// See Note [Data-parallel internals] in docs/data_parallel.md.
#include "distributed/ddp/gradient_buckets.h"

#include <algorithm>

#include "distributed/collectives/collectives.h"
#include "ops/factory/factory.h"
#include "tensor/cuda_runtime.h"
#include "tensor/grad_mode.h"

namespace tg::distributed {

GradientBuckets::GradientBuckets(std::vector<nn::NamedTensor> params, std::shared_ptr<ProcessGroup> group,
                                 double first_cap_mb, double cap_mb)
    : GradientBuckets(std::move(params), std::move(group),
                      BucketOptions{.first_cap_mb = first_cap_mb, .cap_mb = cap_mb, .last_cap_mb = 0.0,
                                    .reduce_dtype = std::nullopt}) {}

GradientBuckets::GradientBuckets(std::vector<nn::NamedTensor> params, std::shared_ptr<ProcessGroup> group,
                                 const BucketOptions& options)
    : params_(std::move(params)), group_(std::move(group)), bucket_of_(params_.size()),
      reduce_dtype_(options.reduce_dtype) {
  TG_CHECK(!reduce_dtype_ || is_floating(*reduce_dtype_), "[DistributedDataParallel] reduce_dtype ",
           dtype_name(*reduce_dtype_), ": expected a floating dtype (float32, bfloat16, float16 or float64)");
  TG_CHECK(options.last_cap_mb >= 0, "[DistributedDataParallel] last_bucket_cap_mb ", options.last_cap_mb,
           ": expected a size >= 0 (0: off)");
  // The last buckets (reduced after the backward's last kernels, so never overlapped) hold the
  // fewest first parameters that reach last_cap_mb, unless that would be every parameter.
  size_t last_count = 0;
  if (options.last_cap_mb > 0) {
    double bytes = 0;
    while (last_count < params_.size() && bytes < options.last_cap_mb * 1024.0 * 1024.0) {
      const Tensor& p = params_[last_count].second;
      bytes += static_cast<double>(p.numel() * dtype_size(wire_dtype(last_count)));
      ++last_count;
    }
    if (last_count >= params_.size()) last_count = 0;
  }
  std::vector<size_t> main_order, last_order;
  for (size_t k = params_.size(); k-- > 0;) (k < last_count ? last_order : main_order).push_back(k);
  fill_buckets(main_order, options.first_cap_mb, options.cap_mb);
  fill_buckets(last_order, options.last_cap_mb, options.last_cap_mb);
  for (size_t b = 0; b < buckets_.size(); ++b)
    for (size_t k : buckets_[b]) bucket_of_[k] = b;
  ready_.assign(buckets_.size(), 0);
  averages_.resize(buckets_.size());
  got_grad_.assign(params_.size(), false);
  reduced_in_graph_.assign(params_.size(), false);
  local_only_.assign(params_.size(), false);
}

DType GradientBuckets::wire_dtype(size_t k) const { return reduce_dtype_.value_or(params_[k].second.dtype()); }

void GradientBuckets::fill_buckets(const std::vector<size_t>& order, double first_cap_mb, double cap_mb) {
  // A bucket closes once it reaches its cap (PyTorch's rule), and a new one opens for every change
  // of wire dtype or device (one message carries one dtype).
  double cap = first_cap_mb;
  int64_t bytes = 0;
  std::vector<size_t> current;
  auto close = [&] {
    if (current.empty()) return;
    buckets_.push_back(std::move(current));
    current.clear();
    bytes = 0;
    cap = cap_mb;
  };
  for (size_t k : order) {
    const Tensor& p = params_[k].second;
    if (!current.empty()) {
      const size_t head = current.front();
      if (wire_dtype(head) != wire_dtype(k) || params_[head].second.device() != p.device()) close();
    }
    current.push_back(k);
    bytes += p.numel() * dtype_size(wire_dtype(k));
    if (static_cast<double>(bytes) >= cap * 1024.0 * 1024.0) close();
  }
  close();
}

size_t GradientBuckets::index_of(const TensorImpl* leaf) const {
  for (size_t k = 0; k < params_.size(); ++k)
    if (params_[k].second.impl() == leaf) return k;
  TG_FAIL("[DistributedDataParallel] a gradient reached the reducer for a tensor that is not one of its parameters");
}

CollectiveContext GradientBuckets::bucket_context(size_t b) const {
  return {"DDP bucket " + std::to_string(b) + " of " + std::to_string(buckets_.size()), step_};
}

std::vector<std::vector<std::string>> GradientBuckets::bucket_names() const {
  std::vector<std::vector<std::string>> out;
  for (const auto& bucket : buckets_) {
    out.emplace_back();
    for (size_t k : bucket) out.back().push_back(params_[k].first);
  }
  return out;
}

TensorList GradientBuckets::reduce(const std::vector<std::shared_ptr<TensorImpl>>& leaves, const TensorList& grads) {
  std::vector<int64_t> slot_of(params_.size(), -1);
  for (size_t j = 0; j < leaves.size(); ++j) slot_of[index_of(leaves[j].get())] = static_cast<int64_t>(j);
  TensorList reduced(leaves.size());
  // Buckets whose wire dtype is not their gradients': (flat average, members' parameter indices).
  std::vector<std::pair<Tensor, std::vector<size_t>>> converted;
  for (size_t b = 0; b < buckets_.size(); ++b) {
    const auto& bucket = buckets_[b];
    TensorList members;
    std::vector<size_t> slots, indices;
    bool same_dtype = true;
    for (size_t k : bucket) {
      if (slot_of[k] < 0) continue;
      const auto j = static_cast<size_t>(slot_of[k]);
      const Tensor& p = params_[k].second;
      const DType wire = wire_dtype(k);
      same_dtype = same_dtype && p.dtype() == wire;
      // A parameter without a gradient still takes its place in the message, as zeros, so that every
      // rank sends the same bytes.
      const Tensor g = grads[j].defined() ? grads[j] : zeros(p.sizes(), {.dtype = wire, .device = p.device()});
      members.push_back(g.dtype() == wire ? g : g.to(wire));
      slots.push_back(j);
      indices.push_back(k);
    }
    if (members.empty()) continue;
    const CollectiveContextScope context(bucket_context(b));  // traced: the node keeps it for every run
    const Tensor flat = bucket_average(members, group_);
    if (!same_dtype) {
      converted.emplace_back(flat, std::move(indices));
      continue;
    }
    int64_t offset = 0;
    for (size_t i = 0; i < members.size(); ++i) {
      const int64_t n = members[i].numel();
      reduced[slots[i]] = flat.narrow(0, offset, n).view(members[i].sizes());
      offset += n;
    }
  }
  // Averages in another dtype than their gradients are converted back after every bucket was queued
  // (bucket_cast waits for the reductions): these nodes stay at the end of the backward, so the
  // communication still overlaps the backward's other work.
  for (const auto& [flat, indices] : converted) {
    const DType grad_dtype = params_[indices.front()].second.dtype();
    const bool uniform = std::all_of(indices.begin(), indices.end(),
                                     [&](size_t k) { return params_[k].second.dtype() == grad_dtype; });
    const Tensor whole = uniform ? bucket_cast(flat, grad_dtype) : Tensor();
    int64_t offset = 0;
    for (size_t k : indices) {
      const Tensor& p = params_[k].second;
      const int64_t n = p.numel();
      const Tensor slice = uniform ? whole.narrow(0, offset, n) : bucket_cast(flat.narrow(0, offset, n), p.dtype());
      reduced[static_cast<size_t>(slot_of[k])] = slice.view(p.sizes());
      offset += n;
    }
  }
  return reduced;
}

void GradientBuckets::expect_reduced(const std::vector<std::shared_ptr<TensorImpl>>& leaves) {
  // Gradients accumulated under no_sync() are still local: averaging is linear, so averaging them now
  // and adding the graph's averaged gradients gives the average of the sums, as eager mode computes.
  NoGradGuard no_grad;
  if (!leaves.empty()) ++*step_;  // a compiled backward with the buckets in its graph begins
  // Marks left by a compiled backward whose gradients were never accumulated (tg::grad()) are stale.
  std::fill(reduced_in_graph_.begin(), reduced_in_graph_.end(), false);
  for (const auto& leaf : leaves) {
    const size_t k = index_of(leaf.get());
    reduced_in_graph_[k] = true;
    if (!local_only_[k]) continue;
    Tensor g = params_[k].second.grad();
    const CollectiveContextScope context({"DDP gradient of " + params_[k].first + " accumulated under no_sync()", step_});
    if (g.defined() && g.dtype() == wire_dtype(k)) {
      all_reduce_(g, ReduceOp::Avg, group_);
    } else if (g.defined()) {  // averaged in reduce_dtype, as the buckets are
      Tensor wire = g.to(wire_dtype(k));
      all_reduce_(wire, ReduceOp::Avg, group_);
      g.copy_(wire);
    }
    local_only_[k] = false;
  }
}

void GradientBuckets::on_accumulated(const Tensor& leaf) {
  const size_t k = index_of(leaf.impl());
  if (reduced_in_graph_[k]) {
    reduced_in_graph_[k] = false;
    return;
  }
  if (!sync_.peek()) {
    local_only_[k] = true;
    return;
  }
  if (got_grad_[k]) return;  // a second accumulation in one backward: the bucket reads the final .grad
  got_grad_[k] = true;
  ++ready_[bucket_of_[k]];
  launch_ready_buckets();
}

void GradientBuckets::launch_ready_buckets() {
  NoGradGuard no_grad;
  while (next_bucket_ < buckets_.size() && ready_[next_bucket_] == buckets_[next_bucket_].size()) {
    TensorList grads;
    for (size_t k : buckets_[next_bucket_]) {
      const Tensor g = params_[k].second.grad();
      grads.push_back(g.dtype() == wire_dtype(k) ? g : g.to(wire_dtype(k)));
    }
    if (next_bucket_ == 0) ++*step_;  // an eager backward's reductions begin
    const CollectiveContextScope context(bucket_context(next_bucket_));
    averages_[next_bucket_] = bucket_average(grads, group_);
    ++next_bucket_;
  }
  if (next_bucket_ == buckets_.size()) finish();
}

void GradientBuckets::finish() {
  cuda::join_forked_work();
  for (size_t b = 0; b < buckets_.size(); ++b) {
    int64_t offset = 0;
    for (size_t k : buckets_[b]) {
      Tensor g = params_[k].second.grad();
      g.copy_(averages_[b].narrow(0, offset, g.numel()).view(g.sizes()));  // converts a reduce_dtype back
      offset += g.numel();
      local_only_[k] = false;
    }
    averages_[b] = Tensor();
  }
  std::fill(ready_.begin(), ready_.end(), 0);
  std::fill(got_grad_.begin(), got_grad_.end(), false);
  next_bucket_ = 0;
}

void GradientBuckets::check_finished() {
  // An eager forward starts a step whose backward reduces eagerly: no compiled backward is pending.
  std::fill(reduced_in_graph_.begin(), reduced_in_graph_.end(), false);
  const bool started = std::any_of(ready_.begin(), ready_.end(), [](size_t r) { return r > 0; });
  if (!started) return;
  std::string missing;
  for (size_t k = 0; k < params_.size(); ++k)
    if (!got_grad_[k]) missing += (missing.empty() ? "" : ", ") + params_[k].first;
  cuda::join_forked_work();
  std::fill(ready_.begin(), ready_.end(), 0);
  std::fill(got_grad_.begin(), got_grad_.end(), false);
  std::fill(averages_.begin(), averages_.end(), Tensor());
  next_bucket_ = 0;
  TG_FAIL("[DistributedDataParallel] the previous backward produced no gradient for ", missing,
          ", so their buckets were never reduced and the ranks' gradients differ: every parameter that requires grad "
          "must take part in the loss (or set requires_grad false on the unused ones)");
}

}  // namespace tg::distributed
