// ZeRO stage 2's gradient reduction: each backward reduce-scatters the gradients bucket by bucket
// into the ranks' gradient shards and drops the full gradients. See Note [Sharded optimizer] in
// docs/sharded_optimizer.md.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tensor/tensor.h"

namespace tg::distributed {

class ZeroRedundancyOptimizer;

// Driven by the parameters' post-accumulate-grad hooks: once every gradient of a bucket is there
// (buckets go out in one order on every rank), the bucket is averaged over the ranks with one
// reduce_scatter, this rank's block is added to its shard parameter's .grad (so backwards accumulate
// as they would into .grad), and the bucket's parameters lose their .grad. Compiled backwards
// deliver their gradients through the same hooks once the backward graph has run.
class ShardedGradientBuckets {
 public:
  explicit ShardedGradientBuckets(ZeroRedundancyOptimizer& owner);
  // Registers the hooks (they hold this weakly: once it is gone they do nothing).
  void attach();
  // Stops reducing (the optimizer is being destroyed).
  void detach() { attached_ = false; }
  // Called after parameter `index`'s .grad was accumulated.
  void on_accumulated(size_t index);
  // Throws, naming the parameters without a gradient, when a backward left buckets unreduced (and
  // forgets that backward's progress).
  void check_finished();

 private:
  void launch_ready();

  ZeroRedundancyOptimizer& owner_;
  bool attached_ = true;
  std::vector<std::pair<size_t, size_t>> order_;  // (group, bucket) in reduction order
  std::vector<size_t> slot_of_;                   // per parameter: its bucket's place in order_
  std::vector<size_t> sizes_;                     // per slot: its parameters
  std::vector<size_t> ready_;                     // per slot: gradients accumulated this backward
  std::vector<bool> got_grad_;                    // per parameter, this backward
  size_t next_ = 0;                               // the next slot to reduce
  // The backward whose reductions run or ran last (from 0; -1 before the first): named by messages.
  std::shared_ptr<std::atomic<int64_t>> step_ = std::make_shared<std::atomic<int64_t>>(-1);
};

}  // namespace tg::distributed
