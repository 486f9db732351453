// ZeroRedundancyOptimizer: an optimizer whose state (ZeRO stage 1), and optionally whose gradients
// (stage 2), are sharded over the ranks of a process group (PyTorch's
// torch.distributed.optim.ZeroRedundancyOptimizer, and DeepSpeed's stage 2 for the gradients).
// See Note [Sharded optimizer] in docs/sharded_optimizer.md.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "distributed/collectives/process_group.h"
#include "distributed/zero/zero_layout.h"
#include "ops/core/guarded_value.h"
#include "optim/optimizer.h"

namespace tg::distributed {

class ShardedGradientBuckets;

// Makes the wrapped optimizer over the given (shard) parameters: the optimizer class and its options.
using OptimizerFactory = std::function<std::unique_ptr<optim::Optimizer>(TensorList params)>;

// optimizer_class<optim::AdamW>(optim::AdamOptions{.lr = 1e-3}): PyTorch's optimizer_class and
// **defaults arguments.
template <typename OptimizerT, typename Options>
OptimizerFactory optimizer_class(Options options) {
  return [options](TensorList params) { return std::make_unique<OptimizerT>(std::move(params), options); };
}

// Options of ZeroRedundancyOptimizer.
struct ZeroOptions {
  std::shared_ptr<ProcessGroup> process_group;  // null: the default group
  // 1: the optimizer state is sharded and step() reduce-scatters the gradients. 2: the gradients
  // too: a backward reduce-scatters each bucket as soon as its gradients exist and drops the full
  // gradients, keeping only this rank's shard (the model must then not be wrapped in
  // DistributedDataParallel: this replaces its reduction).
  int stage = 1;
  // Stage 2's buckets (about this many MiB of gradients each, in reverse registration order).
  // Stage 1 uses one bucket per dtype, so that each rank's shard is one contiguous run.
  double bucket_cap_mb = 25.0;
  // Above zero: the sharded gradients are clipped to this total 2-norm before every update (as
  // clip_grad_norm_ on the averaged full gradients would), inside the step, so compiled steps clip too.
  double max_grad_norm = 0.0;
};

// Wraps an elementwise optimizer (SGD, Adam, AdamW) over `params`, every rank updating only its shard.
// Each dtype's parameters are laid out in one flat space (ZeroLayout), padded to a multiple of the
// world size; rank r owns block r of it, and the wrapped optimizer holds a flat copy of that block
// (its "shard parameter") and state for it alone, 1/world_size of the moments. A step averages the
// gradients into the shards (reduce_scatter), optionally clips them by their global norm (one
// all_reduce of the shards' squared norms), updates the shard, and all-gathers the shards into the
// parameters: the parameters of every rank equal those of DistributedDataParallel with the wrapped
// optimizer (exactly, up to the order of the reductions).
//
// The parameters of every rank start from rank 0's (broadcast at construction). At stage 1 the
// model may also be wrapped in DistributedDataParallel (construct this afterwards): the gradients
// then arrive averaged, and step() takes its shard of them without communicating, as PyTorch's
// ZeroRedundancyOptimizer does. A parameter without a gradient counts as a zero gradient.
//
// A skip flag (set_skip_if, as GradScaler sets its found-inf flag) is maximized over the ranks in
// place before each update, so that all ranks skip together and GradScaler's scale stays the same
// everywhere.
//
// It is an optim::Optimizer: learning-rate schedulers drive it, CompiledStep compiles its update
// (collectives included), and state_dict() is the wrapped optimizer's in PyTorch's format for the
// whole model (after consolidate_state_dict() when the world has more than one rank).
class ZeroRedundancyOptimizer : public optim::Optimizer {
 public:
  ZeroRedundancyOptimizer(TensorList params, OptimizerFactory optimizer_class, ZeroOptions options = {});
  ~ZeroRedundancyOptimizer() override;

  // Stage 1: `grads` are the parameters' gradients (one each, undefined as zeros). Stage 2: the
  // reduced shard gradients (one per group, params()'s gradients), as step() passes them.
  void update(const TensorList& grads) override;
  void set_capturable(bool value) override;
  bool needs_eager_step() const override;
  void set_lr(double lr) override;

  // The wrapped optimizer (over this rank's shard parameters): its hyperparameters are set there.
  optim::Optimizer& optimizer() { return *inner_; }
  const optim::Optimizer& optimizer() const { return *inner_; }
  // The model's parameters, in the order given (params() is the same list at stage 1; at stage 2
  // params() is the shard parameters, whose .grad holds the reduced gradient shards).
  const TensorList& model_params() const { return model_params_; }
  const ZeroLayout& layout() const { return layout_; }
  int stage() const { return stage_; }
  int rank() const { return group_->rank(); }
  int world_size() const { return group_->world_size(); }
  // This rank's shard parameter of each group (the wrapped optimizer's parameters).
  const TensorList& shard_params() const { return shard_params_; }
  // Elements of optimizer state held on this rank (the wrapped optimizer's state tensors).
  int64_t state_numel() const;

  // Clipping by the global 2-norm of the gradient shards (0 turns it off; a change of value is a fill,
  // turning it on or off re-traces a compiled step).
  void set_max_grad_norm(double max_norm);
  double max_grad_norm() const { return max_grad_norm_.peek(); }
  // The total gradient norm found by the last clipping update (a 0-dim device tensor; undefined
  // before one).
  const Tensor& last_grad_norm() const { return last_grad_norm_; }

  // Gathers the full optimizer state on rank `to` (a collective: every rank calls it); state_dict()
  // on that rank then returns it, as PyTorch's consolidate_state_dict(to).
  void consolidate_state_dict(int to = 0);
  // The full state in the wrapped optimizer's format, as if it were one optimizer over the model's
  // parameters ("state.<i>.<name>" for parameter i): loadable into that optimizer, or into a
  // ZeroRedundancyOptimizer of any world size. A group of one needs no consolidation.
  std::map<std::string, Tensor> state_dict() const override;
  // Loads a full state (state_dict()'s, or the plain optimizer's), keeping this rank's shard.
  // Everything is checked before anything changes.
  void load_state_dict(const std::map<std::string, Tensor>& dict) override;

  // Sharded checkpoints: every rank writes its shard of the state to
  // `dir`/zero_shard_<rank>_of_<world>.safetensors, and rank 0 the index `dir`/zero_index.json (the
  // world size, the flat layout, the shards' names); a collective. `dir` must exist.
  void save_sharded(const std::string& dir) const;
  // Reads a sharded checkpoint written by any number of ranks and keeps this rank's shard
  // (re-sharding when the world size differs). A damaged, incomplete or mismatched checkpoint (another
  // model, another optimizer) is an error naming the file and what differs, before anything changes.
  void load_sharded(const std::string& dir);

 private:
  friend class ShardedGradientBuckets;
  // The averaged gradient shard of each group, from the parameters' local gradients.
  TensorList reduce_scatter_grads(const TensorList& grads);
  // Clips the shard gradients by their global norm, in place.
  void clip_(const TensorList& shard_grads);
  // Copies this rank's blocks of the parameters into the shard parameters.
  void refresh_shards();
  // Writes the updated shards into the parameters (all_gather per bucket).
  void gather_params();
  // "group 0 bucket 2 of 3": names a bucket's collectives in the messages of a stalled one.
  std::string describe_bucket(size_t group, size_t bucket) const;
  // This rank's shard of a full state dict, in the wrapped optimizer's format over the shard params.
  std::map<std::string, Tensor> shard_dict(const std::map<std::string, Tensor>& full) const;
  // The full state dict from every rank's shard dict (in the same order as the ranks).
  std::map<std::string, Tensor> full_dict(const std::vector<std::map<std::string, Tensor>>& shards,
                                          const ZeroLayout& layout) const;

  std::shared_ptr<ProcessGroup> group_;
  int stage_;
  ZeroLayout layout_;
  TensorList model_params_;
  TensorList shard_params_;
  std::unique_ptr<optim::Optimizer> inner_;
  bool pre_averaged_ = false;  // stage 1 under DistributedDataParallel
  optim::DeviceScalar max_grad_norm_{"max_grad_norm", 0.0};
  Guarded<bool> clipping_{"ZeroRedundancyOptimizer.max_grad_norm > 0", false};
  Tensor last_grad_norm_;
  std::map<std::string, Tensor> consolidated_;
  std::shared_ptr<ShardedGradientBuckets> reducer_;  // stage 2
};

}  // namespace tg::distributed
