// See Note [Fully sharded data parallel] in docs/fsdp.md.
#include "distributed/fsdp/fsdp_gather.h"

#include "distributed/collectives/collective_context.h"
#include "distributed/collectives/collectives.h"
#include "ops/core/dispatch.h"

namespace tg::distributed {
namespace {

// Gathers the shards into one flat tensor, asynchronously on NCCL (gather_shard waits for it); its
// backward averages the flat gradient over the ranks and keeps this rank's block (a reduce-scatter,
// asynchronous and waited for), so the shard's gradient is eager fully_shard's.
class ShardGatherOp final : public Op {
 public:
  ShardGatherOp(std::shared_ptr<ProcessGroup> group, std::string label, bool recompute)
      : group_(std::move(group)),
        label_(std::move(label)),
        schema_{.name = recompute ? "fsdp_regather" : "fsdp_all_gather", .flags = kCollective} {}
  const OpSchema& schema() const override { return schema_; }
  SaveSpec saves() const override { return {.inputs = false}; }
  std::vector<TensorMeta> infer(const TensorList& in) const override {
    const Tensor& t = in[0];
    TG_CHECK(t.defined(), "[", name(), "] got an undefined shard");
    TG_CHECK(t.dim() == 1, "[", name(), "] expected a flat (1-d) shard, got shape ", shape_str(t.sizes()));
    return single_output(contiguous_meta({t.numel() * group_->world_size()}, t.dtype(), t.device()));
  }
  void eval(const TensorList& in, TensorList& out) const override {
    const CollectiveContextScope context({label_, nullptr});
    group_->all_gather(in[0].contiguous(), out[0], /*async=*/true);
  }
  TensorList backward(const BackwardContext&, const TensorList& grads) const override {
    const CollectiveContextScope context({label_ + " (gradients)", nullptr});
    const Tensor& g = grads[0];
    return {collective_wait(reduce_scatter_async(g.reshape({group_->world_size(), g.numel() / group_->world_size()}),
                                                 ReduceOp::Avg, group_))};
  }

 private:
  std::shared_ptr<ProcessGroup> group_;
  std::string label_;
  OpSchema schema_;
};

}  // namespace

Tensor gather_shard(const Tensor& shard, std::shared_ptr<ProcessGroup> group, std::string label, bool recompute) {
  // Waited for where it is traced: under compile() the scheduling pass leaves the gather one unit ahead
  // and the wait before the unit's first read, so the gather overlaps the previous unit's compute.
  return collective_wait(call_op<ShardGatherOp>({shard}, std::move(group), std::move(label), recompute));
}

}  // namespace tg::distributed
