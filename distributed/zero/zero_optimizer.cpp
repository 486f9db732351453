// See Note [Sharded optimizer] in docs/sharded_optimizer.md.
#include "distributed/zero/zero_optimizer.h"

#include <algorithm>

#include "distributed/collectives/collectives.h"
#include "distributed/zero/sharded_gradient_buckets.h"
#include "ops/elementwise/binary.h"
#include "ops/elementwise/unary.h"
#include "ops/factory/factory.h"
#include "ops/reduce/reduce.h"
#include "ops/shape/join.h"
#include "tensor/check.h"
#include "tensor/grad_mode.h"

namespace tg::distributed {

ZeroRedundancyOptimizer::ZeroRedundancyOptimizer(TensorList params, OptimizerFactory optimizer_class,
                                                 ZeroOptions options)
    : Optimizer(std::move(params), 0.0),
      group_(options.process_group ? options.process_group : default_group()),
      stage_(options.stage) {
  TG_CHECK(stage_ == 1 || stage_ == 2, "[ZeroRedundancyOptimizer] stage ", stage_, ": expected 1 or 2");
  TG_CHECK(optimizer_class, "[ZeroRedundancyOptimizer] got no optimizer class");
  TG_CHECK(!params_.empty(), "[ZeroRedundancyOptimizer] got an empty parameter list");
  TG_CHECK(options.bucket_cap_mb > 0, "[ZeroRedundancyOptimizer] bucket_cap_mb ", options.bucket_cap_mb,
           ": expected a positive size");
  model_params_ = params_;
  const int world = group_->world_size();
  // Stage 1 reduces each group with one collective, so that each rank's shard is one contiguous run.
  layout_ = ZeroLayout::build(model_params_, world, stage_ == 1 ? 0.0 : options.bucket_cap_mb);

  NoGradGuard no_grad;
  size_t reduced = 0;
  for (size_t i = 0; i < model_params_.size(); ++i) {
    Tensor p = model_params_[i];
    TG_CHECK(p.is_contiguous(), "[ZeroRedundancyOptimizer] parameter ", i, " is not contiguous (strides ",
             shape_str(p.strides()), ")");
    TG_CHECK(world == 1 || p.device() == group_->device(), "[ZeroRedundancyOptimizer] parameter ", i, " is on ",
             p.device().str(), ", expected the process group's device ", group_->device().str());
    const AutogradMeta* meta = p.impl()->autograd_if_present();
    TG_CHECK(!meta || !dynamic_cast<const ShardedGradientBuckets*>(meta->grad_reducer.get()),
             "[ZeroRedundancyOptimizer] parameter ", i, " already has its gradients sharded by another stage 2 "
             "ZeroRedundancyOptimizer: expected one per parameter");
    if (meta && meta->grad_reducer) ++reduced;
    broadcast_(p, 0, group_);  // every rank starts from rank 0's parameters
  }
  TG_CHECK(reduced == 0 || reduced == model_params_.size(), "[ZeroRedundancyOptimizer] ", reduced, " of ",
           model_params_.size(), " parameters belong to a DistributedDataParallel: expected all or none");
  pre_averaged_ = reduced > 0;
  TG_CHECK(stage_ == 1 || !pre_averaged_, "[ZeroRedundancyOptimizer] stage 2 reduces the gradients itself: don't wrap "
           "the model in DistributedDataParallel (or use stage 1)");

  for (size_t g = 0; g < layout_.groups.size(); ++g) {
    TensorList values;
    for (size_t k : layout_.groups[g].members) values.push_back(model_params_[k]);
    Tensor shard = layout_.shard_of(g, group_->rank(), values, model_params_[layout_.groups[g].members[0]]);
    shard.requires_grad_(true);
    shard_params_.push_back(shard);
  }
  inner_ = optimizer_class(shard_params_);
  TG_CHECK(inner_ && inner_->params().size() == shard_params_.size(),
           "[ZeroRedundancyOptimizer] the optimizer class must make an optimizer over the parameters it is given");
  lr_.set(inner_->lr());
  set_max_grad_norm(options.max_grad_norm);
  bool any_double = false;
  for (const ZeroGroup& g : layout_.groups) any_double = any_double || g.dtype == kFloat64;
  last_grad_norm_ = zeros({}, {.dtype = any_double ? kFloat64 : kFloat32, .device = shard_params_[0].device()});
  max_grad_norm_.on(last_grad_norm_.device());  // made now, so that a trace captures it rather than making it
  if (stage_ == 2) {
    params_ = shard_params_;  // step() and zero_grad() work on the reduced gradient shards
    reducer_ = std::make_shared<ShardedGradientBuckets>(*this);
    reducer_->attach();
  }
}

ZeroRedundancyOptimizer::~ZeroRedundancyOptimizer() {
  if (reducer_) reducer_->detach();
}

void ZeroRedundancyOptimizer::set_capturable(bool value) {
  Optimizer::set_capturable(value);
  inner_->set_capturable(value);
}

bool ZeroRedundancyOptimizer::needs_eager_step() const { return inner_->needs_eager_step(); }

void ZeroRedundancyOptimizer::set_lr(double lr) {
  Optimizer::set_lr(lr);
  inner_->set_lr(lr);
}

void ZeroRedundancyOptimizer::set_max_grad_norm(double max_norm) {
  TG_CHECK(max_norm >= 0.0, "[ZeroRedundancyOptimizer] max_grad_norm ", max_norm, ": expected a norm >= 0 (0: off)");
  max_grad_norm_.set(max_norm);
  if (clipping_.peek() != (max_norm > 0.0)) clipping_.set(max_norm > 0.0);
}

int64_t ZeroRedundancyOptimizer::state_numel() const {
  int64_t n = 0;
  for (const auto& [key, t] : inner_->state_dict())
    if (key.rfind("state.", 0) == 0) n += t.numel();
  return n;
}

void ZeroRedundancyOptimizer::update(const TensorList& grads) {
  NoGradGuard no_grad;
  TensorList shard_grads;
  if (stage_ == 1) {
    TG_CHECK(grads.size() == model_params_.size(), "[ZeroRedundancyOptimizer] got ", grads.size(), " gradients for ",
             model_params_.size(), " parameters");
    size_t reduced = 0;
    for (const Tensor& p : model_params_) {
      const AutogradMeta* meta = p.impl()->autograd_if_present();
      if (meta && meta->grad_reducer) ++reduced;
    }
    TG_CHECK(reduced == (pre_averaged_ ? model_params_.size() : 0), "[ZeroRedundancyOptimizer] the parameters ",
             pre_averaged_ ? "no longer belong" : "now belong",
             " to a DistributedDataParallel: construct the optimizer after wrapping the model");
    shard_grads = reduce_scatter_grads(grads);
  } else {
    if (!is_tracing()) reducer_->check_finished();
    TG_CHECK(grads.size() == shard_params_.size(), "[ZeroRedundancyOptimizer] got ", grads.size(),
             " gradients for ", shard_params_.size(), " shard parameters (at stage 2 step() passes the gradient shards)");
    // Shards without a gradient (no backward since zero_grad()) update with zeros, as every rank must
    // take part in the gathers.
    for (size_t g = 0; g < grads.size(); ++g)
      shard_grads.push_back(grads[g].defined() ? grads[g] : zeros_like(shard_params_[g]));
  }
  refresh_shards();
  if (clipping_.get()) clip_(shard_grads);
  if (skip_if_.defined() && group_->world_size() > 1) {
    // Every rank skips together: each saw only its gradients (or its shard of them). The maximum is
    // written into the flag itself, so that GradScaler's scale update, which reads it, agrees too.
    Tensor flag = skip_if_;
    const CollectiveContextScope context({"ZeRO skip flag", nullptr});
    all_reduce_(flag, ReduceOp::Max, group_);
  }
  inner_->set_skip_if(skip_if_);
  inner_->update(shard_grads);
  gather_params();
}

TensorList ZeroRedundancyOptimizer::reduce_scatter_grads(const TensorList& grads) {
  const int world = group_->world_size(), rank = group_->rank();
  TensorList out;
  for (size_t gi = 0; gi < layout_.groups.size(); ++gi) {
    const ZeroGroup& g = layout_.groups[gi];
    TensorList blocks;
    for (size_t b = 0; b < g.buckets.size(); ++b) {
      const ZeroBucket& bucket = g.buckets[b];
      TensorList parts;
      int64_t used = 0;
      for (size_t m = 0; m < g.members.size(); ++m) {
        if (g.bucket_of[m] != b) continue;
        const Tensor& grad = grads[g.members[m]];
        TG_CHECK(!grad.defined() || (grad.numel() == g.numel(m) && grad.dtype() == g.dtype),
                 "[ZeroRedundancyOptimizer] the gradient of parameter ", g.members[m], " is ",
                 dtype_name(grad.dtype()), " of shape ", shape_str(grad.sizes()), ", expected ", dtype_name(g.dtype),
                 " of shape ", shape_str(g.shapes[m]));
        parts.push_back(grad.defined() ? grad.reshape({-1}) : zeros({g.numel(m)}, {.dtype = g.dtype, .device = g.device}));
        used += g.numel(m);
      }
      if (bucket.size > used) parts.push_back(zeros({bucket.size - used}, {.dtype = g.dtype, .device = g.device}));
      const Tensor flat = cat(parts);
      const int64_t block = bucket.size / world;
      const CollectiveContextScope context({"ZeRO reduce-scatter, " + describe_bucket(gi, b), nullptr});
      blocks.push_back(pre_averaged_ ? flat.narrow(0, rank * block, block)
                                     : reduce_scatter(flat.view({world, block}), ReduceOp::Avg, group_));
    }
    out.push_back(blocks.size() == 1 ? blocks[0] : cat(blocks));
  }
  return out;
}

void ZeroRedundancyOptimizer::clip_(const TensorList& shard_grads) {
  // The squared 2-norm of this rank's shards, summed over the ranks: the padding holds zeros, and the
  // shards partition the flat space, so this is the norm of the averaged full gradients.
  const DType acc = last_grad_norm_.dtype();
  Tensor squares;
  for (const Tensor& g : shard_grads) {
    const Tensor x = g.dtype() == acc ? g : g.to(acc);
    const Tensor s = sum(mul(x, x)).to(last_grad_norm_.device());
    squares = squares.defined() ? add(squares, s) : s;
  }
  const CollectiveContextScope context({"ZeRO gradient norm", nullptr});
  const Tensor total = sqrt(all_reduce(squares, ReduceOp::Sum, group_));
  const Tensor limit = max_grad_norm_.on(total.device()).to(acc);
  const Tensor coef = clamp(div(limit, add(total, 1e-6)), std::nullopt, 1.0);
  for (const Tensor& g : shard_grads) {
    Tensor handle = g;
    handle.mul_(coef.to(g.device(), g.dtype()));
  }
  last_grad_norm_.copy_(total);
}

void ZeroRedundancyOptimizer::refresh_shards() {
  // The shard parameters are copies of this rank's blocks of the parameters; the copy makes a load
  // of the model's weights (or any other write to them) since the last step count.
  for (size_t gi = 0; gi < layout_.groups.size(); ++gi) {
    const ZeroGroup& g = layout_.groups[gi];
    Tensor& shard = shard_params_[gi];
    for (const ZeroPiece& piece : layout_.pieces(gi, group_->rank()))
      shard.narrow(0, piece.shard_offset, piece.length)
          .copy_(model_params_[g.members[piece.member]].view({-1}).narrow(0, piece.param_offset, piece.length));
  }
}

std::string ZeroRedundancyOptimizer::describe_bucket(size_t group, size_t bucket) const {
  return "group " + std::to_string(group) + " bucket " + std::to_string(bucket) + " of " +
         std::to_string(layout_.groups[group].buckets.size());
}

void ZeroRedundancyOptimizer::gather_params() {
  const int world = group_->world_size();
  for (size_t gi = 0; gi < layout_.groups.size(); ++gi) {
    const ZeroGroup& g = layout_.groups[gi];
    const Tensor& shard = shard_params_[gi];
    for (size_t b = 0; b < g.buckets.size(); ++b) {
      const ZeroBucket& bucket = g.buckets[b];
      const int64_t block = bucket.size / world;
      const CollectiveContextScope context({"ZeRO all-gather, " + describe_bucket(gi, b), nullptr});
      const Tensor full = all_gather(shard.narrow(0, layout_.shard_offset(gi, b), block), group_).view({bucket.size});
      for (size_t m = 0; m < g.members.size(); ++m) {
        if (g.bucket_of[m] != b) continue;
        Tensor p = model_params_[g.members[m]];
        p.copy_(full.narrow(0, g.offsets[m] - bucket.offset, g.numel(m)).view(g.shapes[m]));
      }
    }
  }
}

}  // namespace tg::distributed
