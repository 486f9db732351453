// The reducer behind DistributedDataParallel: parameters grouped into buckets, and the state of one
// backward's reductions.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "autograd/grad_reducer.h"
#include "distributed/collectives/collective_context.h"
#include "distributed/collectives/process_group.h"
#include "nn/module.h"
#include "ops/core/guarded_value.h"

namespace tg::distributed {

// How GradientBuckets groups the gradients and in which dtype they travel (DDP's options).
struct BucketOptions {
  double first_cap_mb = 1.0;    // the first bucket reduced (the last layers' gradients)
  double cap_mb = 25.0;         // every other bucket
  double last_cap_mb = 0.0;     // above 0: the first parameters, up to this size, form the last buckets
  std::optional<DType> reduce_dtype;  // the dtype the buckets travel and accumulate in (none: the gradients')
};

// Averages the gradients of a fixed list of parameters over a process group, bucket by bucket.
// Eager backwards report each accumulated gradient (on_accumulated); a bucket whose gradients are
// all there is reduced asynchronously, and once the last bucket is queued the current stream waits
// for all of them and the averages are copied back into .grad. Compiled backwards call reduce()
// while tracing, so the same buckets become nodes of the backward graph.
class GradientBuckets final : public GradReducer {
 public:
  // `params`: (name, parameter) pairs in registration order; buckets are filled in reverse order.
  GradientBuckets(std::vector<nn::NamedTensor> params, std::shared_ptr<ProcessGroup> group, double first_cap_mb,
                  double cap_mb);
  GradientBuckets(std::vector<nn::NamedTensor> params, std::shared_ptr<ProcessGroup> group,
                  const BucketOptions& options);

  bool reducing() const override { return sync_.get(); }
  TensorList reduce(const std::vector<std::shared_ptr<TensorImpl>>& leaves, const TensorList& grads) override;
  void expect_reduced(const std::vector<std::shared_ptr<TensorImpl>>& leaves) override;

  // Called after `leaf`'s .grad was accumulated by an eager backward.
  void on_accumulated(const Tensor& leaf);
  // Throws when the previous backward left buckets unreduced (some parameter got no gradient).
  void check_finished();
  // Whether backwards reduce (false inside no_sync()).
  void set_sync(bool on) { sync_.set(on); }
  bool sync() const { return sync_.peek(); }
  // Parameter names per bucket.
  std::vector<std::vector<std::string>> bucket_names() const;

 private:
  // "DDP bucket b of n" with the step counter: what bucket b's reduction is called if it stalls.
  CollectiveContext bucket_context(size_t b) const;
  size_t index_of(const TensorImpl* leaf) const;
  // The dtype parameter k's gradient travels in.
  DType wire_dtype(size_t k) const;
  // Appends the buckets of `order` (parameter indices in reduction order): the first closes at
  // `first_cap_mb`, the others at `cap_mb`, and a change of wire dtype or device closes one too.
  void fill_buckets(const std::vector<size_t>& order, double first_cap_mb, double cap_mb);
  void launch_ready_buckets();
  void finish();

  std::vector<nn::NamedTensor> params_;
  std::shared_ptr<ProcessGroup> group_;
  std::vector<std::vector<size_t>> buckets_;  // parameter indices, in reduction order
  std::vector<size_t> bucket_of_;             // per parameter
  std::optional<DType> reduce_dtype_;
  Guarded<bool> sync_{"DistributedDataParallel.require_backward_grad_sync", true};
  // The step of the latest synchronized backward (counted from 0; -1 before the first): the step
  // that collective messages name.
  std::shared_ptr<std::atomic<int64_t>> step_ = std::make_shared<std::atomic<int64_t>>(-1);

  // One eager backward's progress.
  std::vector<size_t> ready_;          // per bucket: gradients accumulated so far
  size_t next_bucket_ = 0;             // the next bucket to reduce (buckets go out in order on every rank)
  std::vector<Tensor> averages_;       // per reduced bucket: its flat average
  std::vector<bool> got_grad_;         // per parameter, this backward
  std::vector<bool> reduced_in_graph_; // per parameter: a compiled backward delivers it reduced
  std::vector<bool> local_only_;       // per parameter: .grad holds gradients accumulated under no_sync()
};

}  // namespace tg::distributed
