// See Note [Data-parallel internals] in docs/data_parallel.md.
#include "distributed/collectives/collectives.h"

#include <string>

#include "distributed/collectives/collective_context.h"
#include "ops/core/dispatch.h"
#include "tensor/cuda_runtime.h"

namespace tg::distributed {
namespace {

std::shared_ptr<ProcessGroup> group_or_default(std::shared_ptr<ProcessGroup> group) {
  return group ? std::move(group) : default_group();
}

// The shared part of every collective op: the group it talks to, its name, and the context it was
// created in (a graph node traced inside DDP's bucket scope keeps it for every run of the graph).
class CollectiveOp : public Op {
 public:
  CollectiveOp(std::shared_ptr<ProcessGroup> group, OpSchema schema)
      : group_(std::move(group)), schema_(std::move(schema)) {
    schema_.flags |= kCollective;
  }
  const OpSchema& schema() const override { return schema_; }
  SaveSpec saves() const override { return {.inputs = false}; }

 protected:
  void check_input(const Tensor& t) const {
    TG_CHECK(t.defined(), "[", name(), "] got an undefined tensor");
    TG_CHECK(!has(kInPlace) || t.is_contiguous(), "[", name(), "] writes its tensor in place and needs it contiguous, "
             "got strides ", shape_str(t.strides()));
  }
  // The creation context, current while the collective is issued.
  CollectiveContextScope in_context() const { return CollectiveContextScope(context_); }
  std::shared_ptr<ProcessGroup> group_;
  OpSchema schema_;
  CollectiveContext context_ = current_collective_context();
};

class AllReduceOp final : public CollectiveOp {
 public:
  AllReduceOp(std::shared_ptr<ProcessGroup> group, ReduceOp op, bool in_place)
      : CollectiveOp(std::move(group), in_place ? OpSchema{.name = "all_reduce_", .flags = kInPlace | kNonDifferentiable,
                                                           .mutates = 0}
                                                : OpSchema{.name = "all_reduce"}),
        op_(op) {}
  std::vector<TensorMeta> infer(const TensorList& in) const override {
    check_input(in[0]);
    TG_CHECK(op_ != ReduceOp::Avg || is_floating(in[0].dtype()), "[", name(), "] avg needs a floating dtype, got ",
             dtype_name(in[0].dtype()));
    if (has(kInPlace)) return single_output(meta_of(in[0]));
    return single_output(contiguous_meta(in[0].sizes(), in[0].dtype(), in[0].device()));
  }
  void eval(const TensorList& in, TensorList& out) const override {
    const auto context = in_context();
    group_->all_reduce(in[0].contiguous(), out[0], op_);
  }
  TensorList backward(const BackwardContext&, const TensorList& grads) const override {
    TG_CHECK(op_ != ReduceOp::Max, "[all_reduce] max is not differentiable");
    return {all_reduce(grads[0], op_, group_)};
  }
  std::string attrs() const override { return std::string("op=") + reduce_op_name(op_); }

 private:
  ReduceOp op_;
};

class BroadcastOp final : public CollectiveOp {
 public:
  BroadcastOp(std::shared_ptr<ProcessGroup> group, int root)
      : CollectiveOp(std::move(group), OpSchema{.name = "broadcast_", .flags = kInPlace | kNonDifferentiable,
                                                .mutates = 0}),
        root_(root) {}
  std::vector<TensorMeta> infer(const TensorList& in) const override {
    check_input(in[0]);
    TG_CHECK(root_ >= 0 && root_ < group_->world_size(), "[broadcast_] root ", root_, " is not a rank of a group of ",
             group_->world_size());
    return single_output(meta_of(in[0]));
  }
  void eval(const TensorList& in, TensorList& out) const override {
    const auto context = in_context();
    group_->broadcast(in[0], out[0], root_);
  }
  std::string attrs() const override { return "root=" + std::to_string(root_); }

 private:
  int root_;
};

class AllGatherOp final : public CollectiveOp {
 public:
  AllGatherOp(std::shared_ptr<ProcessGroup> group, bool async)
      : CollectiveOp(std::move(group), OpSchema{.name = "all_gather"}), async_(async) {}
  std::vector<TensorMeta> infer(const TensorList& in) const override {
    check_input(in[0]);
    Shape sizes = in[0].sizes();
    sizes.insert(sizes.begin(), group_->world_size());
    return single_output(contiguous_meta(sizes, in[0].dtype(), in[0].device()));
  }
  void eval(const TensorList& in, TensorList& out) const override {
    const auto context = in_context();
    group_->all_gather(in[0].contiguous(), out[0], async_);
  }
  TensorList backward(const BackwardContext&, const TensorList& grads) const override {
    if (async_) return {collective_wait(reduce_scatter_async(grads[0], ReduceOp::Sum, group_))};
    return {reduce_scatter(grads[0], ReduceOp::Sum, group_)};
  }
  std::string attrs() const override { return async_ ? "async" : ""; }

 private:
  bool async_;
};

class ReduceScatterOp final : public CollectiveOp {
 public:
  ReduceScatterOp(std::shared_ptr<ProcessGroup> group, ReduceOp op, bool async)
      : CollectiveOp(std::move(group), OpSchema{.name = "reduce_scatter"}), op_(op), async_(async) {}
  std::vector<TensorMeta> infer(const TensorList& in) const override {
    check_input(in[0]);
    const Tensor& t = in[0];
    TG_CHECK(t.dim() >= 1 && t.sizes()[0] == group_->world_size(), "[reduce_scatter] expected a leading dimension of ",
             group_->world_size(), " (the world size), got shape ", shape_str(t.sizes()));
    TG_CHECK(op_ != ReduceOp::Avg || is_floating(t.dtype()), "[reduce_scatter] avg needs a floating dtype, got ",
             dtype_name(t.dtype()));
    const Shape sizes(t.sizes().begin() + 1, t.sizes().end());
    return single_output(contiguous_meta(sizes, t.dtype(), t.device()));
  }
  void eval(const TensorList& in, TensorList& out) const override {
    const auto context = in_context();
    group_->reduce_scatter(in[0].contiguous(), out[0], op_, async_);
  }
  TensorList backward(const BackwardContext&, const TensorList& grads) const override {
    TG_CHECK(op_ != ReduceOp::Max, "[reduce_scatter] max is not differentiable");
    Tensor g = async_ ? collective_wait(all_gather_async(grads[0], group_)) : all_gather(grads[0], group_);
    if (op_ == ReduceOp::Avg) g = g * (1.0 / group_->world_size());
    return {g};
  }
  std::string attrs() const override { return std::string("op=") + reduce_op_name(op_) + (async_ ? ", async" : ""); }

 private:
  ReduceOp op_;
  bool async_;
};

// Averages its inputs over ranks into one flat buffer (slices end to end), asynchronously, with one
// grouped launch that reads the inputs where they are (no packing copies).
class BucketAverageOp final : public CollectiveOp {
 public:
  explicit BucketAverageOp(std::shared_ptr<ProcessGroup> group)
      : CollectiveOp(std::move(group), OpSchema{.name = "bucket_average", .flags = kNonDifferentiable}) {}
  std::vector<TensorMeta> infer(const TensorList& in) const override {
    TG_CHECK(!in.empty(), "[bucket_average] expected at least one tensor");
    int64_t total = 0;
    for (size_t i = 0; i < in.size(); ++i) {
      check_input(in[i]);
      TG_CHECK(is_floating(in[i].dtype()), "[bucket_average] tensor ", i, " is ", dtype_name(in[i].dtype()),
               ", expected a floating dtype");
      TG_CHECK(in[i].dtype() == in[0].dtype() && in[i].device() == in[0].device(), "[bucket_average] tensor ", i,
               " is ", dtype_name(in[i].dtype()), " on ", in[i].device().str(), ", expected ",
               dtype_name(in[0].dtype()), " on ", in[0].device().str(), " like tensor 0");
      total += in[i].numel();
    }
    return single_output(contiguous_meta({total}, in[0].dtype(), in[0].device()));
  }
  void eval(const TensorList& in, TensorList& out) const override {
    TensorList dense;
    dense.reserve(in.size());
    for (const Tensor& t : in) dense.push_back(t.contiguous());
    const auto context = in_context();
    group_->all_reduce_into(dense, out[0], ReduceOp::Avg, /*async=*/true);
  }
};

// Converts a bucket's average to another dtype after joining the forked collectives, which its
// consumers could otherwise read before the reduction is done.
class BucketCastOp final : public Op {
 public:
  explicit BucketCastOp(DType dtype) : dtype_(dtype) {}
  const OpSchema& schema() const override {
    static const OpSchema s{.name = "bucket_cast", .flags = kNonDifferentiable};
    return s;
  }
  std::vector<TensorMeta> infer(const TensorList& in) const override {
    TG_CHECK(in[0].defined(), "[bucket_cast] got an undefined tensor");
    TG_CHECK(is_floating(in[0].dtype()) && is_floating(dtype_), "[bucket_cast] converts floating dtypes, got ",
             dtype_name(in[0].dtype()), " to ", dtype_name(dtype_));
    return single_output(contiguous_meta(in[0].sizes(), dtype_, in[0].device()));
  }
  void eval(const TensorList& in, TensorList& out) const override {
    cuda::join_forked_work();
    Tensor dst = out[0];
    dst.copy_(in[0]);
  }
  std::string attrs() const override { return std::string("dtype=") + std::string(dtype_name(dtype_)); }

 private:
  DType dtype_;
};

}  // namespace

Tensor all_reduce(const Tensor& t, ReduceOp op, std::shared_ptr<ProcessGroup> group) {
  return call_op<AllReduceOp>({t}, group_or_default(std::move(group)), op, false);
}

Tensor& all_reduce_(Tensor& t, ReduceOp op, std::shared_ptr<ProcessGroup> group) {
  dispatch(std::make_shared<const AllReduceOp>(group_or_default(std::move(group)), op, true), {t});
  return t;
}

Tensor& broadcast_(Tensor& t, int root, std::shared_ptr<ProcessGroup> group) {
  dispatch(std::make_shared<const BroadcastOp>(group_or_default(std::move(group)), root), {t});
  return t;
}

Tensor all_gather(const Tensor& t, std::shared_ptr<ProcessGroup> group) {
  return call_op<AllGatherOp>({t}, group_or_default(std::move(group)), false);
}

Tensor reduce_scatter(const Tensor& t, ReduceOp op, std::shared_ptr<ProcessGroup> group) {
  return call_op<ReduceScatterOp>({t}, group_or_default(std::move(group)), op, false);
}

Tensor all_gather_async(const Tensor& t, std::shared_ptr<ProcessGroup> group) {
  return call_op<AllGatherOp>({t}, group_or_default(std::move(group)), true);
}

Tensor reduce_scatter_async(const Tensor& t, ReduceOp op, std::shared_ptr<ProcessGroup> group) {
  return call_op<ReduceScatterOp>({t}, group_or_default(std::move(group)), op, true);
}

Tensor bucket_average(const TensorList& tensors, std::shared_ptr<ProcessGroup> group) {
  return dispatch1(std::make_shared<const BucketAverageOp>(group_or_default(std::move(group))), tensors);
}

Tensor bucket_cast(const Tensor& flat, DType dtype) {
  return dispatch1(std::make_shared<const BucketCastOp>(dtype), {flat});
}

}  // namespace tg::distributed
