// ZeRO stage 2's gradient reduction: each backward reduce-scatters the gradients bucket by bucket
// into the ranks' gradient shards and drops the full gradients. See Note [Sharded optimizer] in
// docs/sharded_optimizer.md.
#pragma once

#include <atomic>
#include <deque>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "autograd/grad_reducer.h"
#include "tensor/tensor.h"

namespace tg::distributed {

class ZeroRedundancyOptimizer;

// Eager backwards drive it through the parameters' post-accumulate-grad hooks: once every gradient
// of a bucket is there (buckets go out in one order on every rank), the bucket is averaged over the
// ranks with one asynchronous reduce_scatter, the bucket's parameters lose their .grad, and once the
// bucket issued two later is under way (or the last one is) this rank's block is waited for and added
// to its shard parameter's .grad (so backwards accumulate as they would into .grad).
// Compiled backwards that produce every parameter's gradient fold the same reduce_scatters into the
// backward graph (reduce_elsewhere), which delivers the blocks to the shard parameters' .grad and
// none to the parameters; a graph that produces only some of them leaves them to the hooks.
class ShardedGradientBuckets final : public GradReducer {
 public:
  explicit ShardedGradientBuckets(ZeroRedundancyOptimizer& owner);
  // Registers the hooks (they hold this weakly: once it is gone they do nothing) and attaches this
  // to the parameters as their gradient reducer.
  void attach();
  // Stops reducing and detaches from the parameters (the optimizer is being destroyed).
  void detach();
  // Called after parameter `index`'s .grad was accumulated.
  void on_accumulated(size_t index);
  // Throws, naming the parameters without a gradient, when a backward left buckets unreduced (and
  // forgets that backward's progress).
  void check_finished();

  // GradReducer, for compile(): reduces always (no no_sync(): accumulating backwards add their
  // averaged blocks to the shards, which is the average of the accumulated gradients).
  bool reducing() const override { return attached_; }
  // Refused: the reduced gradients are the shard parameters', which only reduce_elsewhere delivers.
  TensorList reduce(const std::vector<std::shared_ptr<TensorImpl>>& leaves, const TensorList& grads) override;
  // Traces each bucket's reduce_scatter (in the hooks' order) and returns undefined gradients for
  // the parameters, the blocks going `elsewhere` as the shard parameters' gradients; leaves that are
  // not every parameter are returned as they are (the hooks reduce them).
  TensorList reduce_elsewhere(const std::vector<std::shared_ptr<TensorImpl>>& leaves, const TensorList& grads,
                              std::vector<std::pair<Tensor, Tensor>>& elsewhere) override;
  // Counts the step of a compiled backward whose graph holds the reductions.
  void expect_reduced(const std::vector<std::shared_ptr<TensorImpl>>& leaves) override;

 private:
  void launch_ready();
  // This rank's block of bucket `order_[slot]` averaged over the ranks, from its members' gradients
  // (in flat order; undefined ones count as zeros): one asynchronous reduce_scatter, named with the
  // step, whose result is read through collective_wait().
  Tensor reduce_bucket(size_t slot, const TensorList& member_grads) const;
  // Waits for the oldest block in flight and adds it to its shard parameter's .grad.
  void accumulate_oldest();
  // Whether `leaves` are every parameter (a backward graph reducing them all).
  bool covers(const std::vector<std::shared_ptr<TensorImpl>>& leaves) const;

  ZeroRedundancyOptimizer& owner_;
  bool attached_ = true;
  std::unordered_map<const TensorImpl*, size_t> index_of_;  // parameter -> its index
  std::vector<std::pair<size_t, size_t>> order_;  // (group, bucket) in reduction order
  std::vector<size_t> slot_of_;                   // per parameter: its bucket's place in order_
  std::vector<size_t> sizes_;                     // per slot: its parameters
  std::vector<size_t> ready_;                     // per slot: gradients accumulated this backward
  std::vector<bool> got_grad_;                    // per parameter, this backward
  size_t next_ = 0;                               // the next slot to reduce
  // Eager backwards: blocks whose reduce_scatter may still run, oldest first, with their group and
  // offset in the group's shard.
  struct InFlight {
    size_t group;
    int64_t offset;
    Tensor block;
  };
  std::deque<InFlight> in_flight_;
  // The backward whose reductions run or ran last (from 0; -1 before the first): named by messages.
  std::shared_ptr<std::atomic<int64_t>> step_ = std::make_shared<std::atomic<int64_t>>(-1);
};

}  // namespace tg::distributed
