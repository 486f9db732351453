// nn::DistributedDataParallel: one model replica per process, gradients averaged over the ranks in
// buckets while the backward still runs (PyTorch's DistributedDataParallel).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "autograd/grad_reducer.h"
#include "distributed/collectives/process_group.h"
#include "nn/module.h"

namespace tg::distributed {
class GradientBuckets;
}

namespace tg::nn {

// Options of DistributedDataParallel, named as PyTorch's.
struct DistributedDataParallelOptions {
  std::shared_ptr<distributed::ProcessGroup> process_group;  // null: the default group
  double bucket_cap_mb = 25.0;        // gradients reduced together, at most about this many MiB
  double first_bucket_cap_mb = 1.0;   // the first bucket (the last layers' gradients) is smaller, to start early
  // Above 0: the first parameters (the last gradients of a backward), up to about this many MiB, form
  // the last bucket of their own, so that little communication remains once the backward ends.
  double last_bucket_cap_mb = 0.0;
  // The dtype gradients are averaged in (unset: their own): float32 for bfloat16/float16 gradients
  // (FSDP's MixedPrecision(reduce_dtype)), or bfloat16 to halve the traffic of float32 gradients
  // (the bf16_compress hook). Buckets are converted before and converted back after the reduction.
  std::optional<DType> reduce_dtype;
  bool broadcast_buffers = true;      // every forward starts from rank 0's buffers (BatchNorm statistics)
};

// Wraps `module` (as child "module", so state_dict keys read "module.0.weight" as in PyTorch):
// rank 0's parameters and buffers are broadcast at construction; every backward averages the
// gradients over the ranks in buckets (about bucket_cap_mb each, in reverse order of registration,
// which is roughly the order the backward produces them), each bucket as soon as all its gradients
// exist, so communication overlaps the rest of the backward. Under compile() the bucketed
// reductions are part of the backward graph (and of its CUDA graph). Every parameter that requires
// grad must receive a gradient in each backward.
class DistributedDataParallel : public Module {
 public:
  explicit DistributedDataParallel(std::shared_ptr<Module> module, DistributedDataParallelOptions options = {});
  ~DistributedDataParallel() override;
  Tensor forward(const Tensor& input) override;
  std::string type_name() const override { return "DistributedDataParallel"; }
  // The wrapped module.
  const std::shared_ptr<Module>& module() const { return module_; }
  // Parameter names per bucket, in reduction order.
  std::vector<std::vector<std::string>> bucket_names() const;

  // While alive, backwards accumulate gradients locally without communicating (gradient
  // accumulation); the first backward after it averages the accumulated gradients.
  class NoSyncGuard {
   public:
    explicit NoSyncGuard(DistributedDataParallel& ddp);
    ~NoSyncGuard();
    NoSyncGuard(const NoSyncGuard&) = delete;
    NoSyncGuard& operator=(const NoSyncGuard&) = delete;

   private:
    DistributedDataParallel& ddp_;
    bool previous_;
  };
  // no_sync(): `auto guard = ddp.no_sync();`.
  [[nodiscard]] NoSyncGuard no_sync() { return NoSyncGuard(*this); }

 private:
  std::shared_ptr<Module> module_;
  DistributedDataParallelOptions options_;
  std::shared_ptr<distributed::GradientBuckets> buckets_;
};

}  // namespace tg::nn
