// Normalization layers: parameters, buffers and the training/eval switch around ops/norm.
#include "nn/norm.h"

#include <sstream>

#include "ops/elementwise/binary.h"
#include "ops/elementwise/copy.h"
#include "ops/factory/factory.h"
#include "ops/norm/norm.h"
#include "tensor/grad_mode.h"

namespace tg::nn {
namespace {

TensorOptions float_options(TensorOptions options, const char* who) {
  options.dtype = options.dtype_or(kFloat32);
  TG_CHECK(is_floating(*options.dtype), "[", who, "] parameters need a floating dtype, got ",
           dtype_name(*options.dtype));
  options.requires_grad = false;
  return options;
}

std::string bool_str(bool b) { return b ? "true" : "false"; }

}  // namespace

BatchNormBase::BatchNormBase(int64_t num_features, double eps, std::optional<double> momentum, bool affine,
                             bool track_running_stats, TensorOptions options)
    : num_features_(num_features), eps_(eps), momentum_(momentum), affine_(affine),
      track_running_stats_(track_running_stats) {
  TG_CHECK(num_features > 0, "[BatchNorm] num_features must be positive, got ", num_features);
  options = float_options(options, "BatchNorm");
  if (affine) {
    weight_ = register_parameter("weight", ones({num_features}, options));
    bias_ = register_parameter("bias", zeros({num_features}, options));
  }
  if (track_running_stats) {
    running_mean_ = register_buffer("running_mean", zeros({num_features}, options));
    running_var_ = register_buffer("running_var", ones({num_features}, options));
    num_batches_tracked_ =
        register_buffer("num_batches_tracked", zeros({}, TensorOptions{kInt64, options.device, false}));
  }
}

Tensor BatchNormBase::forward(const Tensor& input) {
  check_input(input);
  TG_CHECK(input.sizes()[1] == num_features_, "[", type_name(), "] expected input with ", num_features_,
           " channels (dim 1), got shape ", shape_str(input.sizes()));
  const bool training = is_training();
  if (training && track_running_stats_) {
    Tensor n = num_batches_tracked_;
    copy_(n, add(n, 1));
  }
  // Batch statistics whenever training or there are no running statistics (PyTorch's rule).
  const bool use_batch_stats = training || !track_running_stats_;
  const bool pass_stats = track_running_stats_ && (training || !use_batch_stats);
  if (pass_stats && training && !momentum_) return cumulative_average_forward(input);
  return batch_norm(input, pass_stats ? running_mean_ : Tensor(), pass_stats ? running_var_ : Tensor(), weight_, bias_,
                    use_batch_stats, momentum_.value_or(0.1), eps_);
}

// momentum = None: running = f * batch_stat + (1 - f) * running with f = 1 / num_batches_tracked.
// PyTorch reads the count on the host; here it stays a tensor (no synchronization, and the update
// traces into compiled graphs). batch_norm with momentum 1 writes the batch mean and the unbiased
// batch variance into zeroed stand-ins, which then blend into the buffers.
Tensor BatchNormBase::cumulative_average_forward(const Tensor& input) {
  Tensor batch_mean = zeros_like(running_mean_), batch_var = zeros_like(running_var_);
  Tensor out = batch_norm(input, batch_mean, batch_var, weight_, bias_, true, 1.0, eps_);
  NoGradGuard no_grad;
  const Tensor factor = reciprocal_count();
  for (auto [running, batch] : {std::pair{&running_mean_, &batch_mean}, std::pair{&running_var_, &batch_var}}) {
    copy_(*running, add(mul(*batch, factor), mul(*running, rsub(factor, 1.0))));
  }
  return out;
}

Tensor BatchNormBase::reciprocal_count() const {
  return rdiv(tg::to(num_batches_tracked_, num_batches_tracked_.device(), kFloat64), 1.0).to(running_mean_.dtype());
}

std::string BatchNormBase::extra_repr() const {
  std::ostringstream s;
  s << num_features_ << ", eps=" << eps_ << ", momentum=";
  if (momentum_) s << *momentum_;
  else s << "None";
  s << ", affine=" << bool_str(affine_)
    << ", track_running_stats=" << bool_str(track_running_stats_);
  return s.str();
}

void BatchNorm1d::check_input(const Tensor& input) const {
  TG_CHECK(input.dim() == 2 || input.dim() == 3, "[BatchNorm1d] expected 2-D or 3-D input, got shape ",
           shape_str(input.sizes()));
}

void BatchNorm2d::check_input(const Tensor& input) const {
  TG_CHECK(input.dim() == 4, "[BatchNorm2d] expected 4-D input [N, C, H, W], got shape ", shape_str(input.sizes()));
}

LayerNorm::LayerNorm(Shape normalized_shape, double eps, bool elementwise_affine, bool bias, TensorOptions options)
    : normalized_shape_(std::move(normalized_shape)), eps_(eps) {
  TG_CHECK(!normalized_shape_.empty(), "[LayerNorm] normalized_shape must not be empty");
  options = float_options(options, "LayerNorm");
  if (elementwise_affine) {
    weight_ = register_parameter("weight", ones(normalized_shape_, options));
    if (bias) bias_ = register_parameter("bias", zeros(normalized_shape_, options));
  }
}

Tensor LayerNorm::forward(const Tensor& input) { return layer_norm(input, normalized_shape_, weight_, bias_, eps_); }

AddLayerNormResult LayerNorm::forward_add(const Tensor& residual, const Tensor& update, std::optional<DType> out_dtype) {
  return add_layer_norm(residual, update, normalized_shape_, weight_, bias_, eps_, out_dtype);
}

std::string LayerNorm::extra_repr() const {
  std::ostringstream s;
  s << "(" ;
  for (size_t i = 0; i < normalized_shape_.size(); ++i) s << (i ? ", " : "") << normalized_shape_[i];
  s << (normalized_shape_.size() == 1 ? ",)" : ")") << ", eps=" << eps_
    << ", elementwise_affine=" << bool_str(weight_.defined());
  return s.str();
}

GroupNorm::GroupNorm(int64_t num_groups, int64_t num_channels, double eps, bool affine, TensorOptions options)
    : num_groups_(num_groups), num_channels_(num_channels), eps_(eps) {
  TG_CHECK(num_groups > 0 && num_channels % num_groups == 0, "[GroupNorm] num_channels ", num_channels,
           " must be divisible by num_groups ", num_groups);
  options = float_options(options, "GroupNorm");
  if (affine) {
    weight_ = register_parameter("weight", ones({num_channels}, options));
    bias_ = register_parameter("bias", zeros({num_channels}, options));
  }
}

Tensor GroupNorm::forward(const Tensor& input) { return group_norm(input, num_groups_, weight_, bias_, eps_); }

std::string GroupNorm::extra_repr() const {
  std::ostringstream s;
  s << num_groups_ << ", " << num_channels_ << ", eps=" << eps_ << ", affine=" << bool_str(weight_.defined());
  return s.str();
}

}  // namespace tg::nn
