// One fully sharded unit: the parameters of one module (a block, or the root's own), flattened per
// dtype into ZeroLayout's flat space, of which each rank keeps its block as a leaf (the shard). See
// Note [Fully sharded data parallel] in docs/fsdp.md.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "distributed/collectives/process_group.h"
#include "distributed/zero/zero_layout.h"
#include "tensor/tensor.h"

namespace tg::nn {
class Module;
}

namespace tg::distributed {

struct FullyShardOptions;

// The units under one root, in the order their forward first ran (for prefetching).
struct ShardedTree {
  std::vector<class FullyShardedUnit*> order;
  bool recorded = false;  // set once the root's first forward has finished
};

// Gathers, frees and reduces the parameters of one module; fully_shard() makes one and hooks it into
// the module's forward calls and the parameters' gradients.
class FullyShardedUnit : public std::enable_shared_from_this<FullyShardedUnit> {
 public:
  // `params` (with their names inside `module`) are the parameters this unit manages.
  FullyShardedUnit(nn::Module& module, std::string type, std::shared_ptr<ProcessGroup> group,
                   std::vector<std::pair<std::string, Tensor>> params, bool reshard_after_forward);
  ~FullyShardedUnit();
  FullyShardedUnit(const FullyShardedUnit&) = delete;
  FullyShardedUnit& operator=(const FullyShardedUnit&) = delete;

  // Broadcasts rank 0's values, keeps this rank's shards, frees the full parameters and registers the
  // gradient hooks (once, right after construction).
  void attach();

  // This unit's shard parameters, one flat leaf per dtype and device: what the optimizer updates.
  const TensorList& sharded_parameters() const { return shards_; }
  // The full parameters (module handles; their data exist only while gathered) and their names.
  const TensorList& parameters() const { return params_; }
  const std::vector<std::string>& names() const { return names_; }
  const ZeroLayout& layout() const { return layout_; }
  ProcessGroup& group() const { return *group_; }
  const std::shared_ptr<ProcessGroup>& group_handle() const { return group_; }
  nn::Module& module() const { return module_; }
  bool is_gathered() const { return gathered_; }
  bool is_root() const { return root_; }

  // All-gathers the full parameters from the shards and points the module's parameters at them (a
  // no-op when gathered), then waits for the gathers (also for those of an earlier asynchronous
  // call). A collective. `async` (a prefetch): the gathers run on NCCL's stream and the next
  // unshard() of this unit waits for them (synchronous on the CPU backend).
  void unshard(bool async = false);
  // Frees the full parameters: the module's parameters point at an empty storage whose every read
  // throws an error saying why.
  void reshard();

  // Called by the forward hooks of the module. Under compile()'s tracing they record the gathers
  // as graph nodes instead (trace_unshard); nothing is gathered or freed for real.
  void pre_forward();
  void post_forward(const Tensor& output);
  // Called when the gradient of the unit's output arrives: gathers for the backward, and prefetches
  // the unit that runs backward next.
  void pre_backward();
  // Called after parameter `index`'s .grad was accumulated.
  void on_accumulated(size_t index);

  // Marks this unit as nested in another unit (fully_shard on an ancestor).
  void set_nested(std::shared_ptr<ShardedTree> tree);
  const std::shared_ptr<ShardedTree>& tree() const { return tree_; }

 private:
  void reduce_gradients();
  void check_backward_finished();
  void prefetch(int step);
  // Tracing: gathers the shards with the differentiable gather_shard op and points each parameter
  // at its slice of the traced result, with that slice's gradient history; and undoes it.
  void trace_unshard();
  void end_trace();

  nn::Module& module_;
  std::string type_;
  std::shared_ptr<ProcessGroup> group_;
  TensorList params_;
  std::vector<std::string> names_;
  ZeroLayout layout_;
  TensorList shards_;
  Storage freed_;  // what the parameters point at while resharded
  TensorList pending_gathers_;  // the full parameters an asynchronous unshard() is still gathering
  bool reshard_after_forward_ = true;
  bool gathered_ = true;  // the parameters start with their own data
  bool root_ = true;
  std::shared_ptr<ShardedTree> tree_;
  std::vector<bool> got_grad_;  // per parameter, this backward
  size_t expected_ = 0;         // parameters that require grad
  size_t arrived_ = 0;
  bool reduced_ = false;  // this unit's gradients were reduced since its last forward
  int traced_calls_ = 0;  // calls of the module being traced that are running (the parameters are traced views)
};

}  // namespace tg::distributed
