// Normalization layers: BatchNorm1d, BatchNorm2d, LayerNorm, GroupNorm (PyTorch's options and init).
#pragma once

#include <optional>

#include "nn/module.h"
#include "ops/norm/add_layer_norm.h"

namespace tg::nn {

// Shared by BatchNorm1d/2d: weight (ones) and bias (zeros) when affine; buffers running_mean
// (zeros), running_var (ones) and num_batches_tracked (int64 0) when track_running_stats.
// Training mode (is_training()) normalizes with batch statistics and updates the buffers in place:
// an exponential moving average with factor momentum, or with momentum = nullopt (PyTorch's None)
// the cumulative average, factor 1 / num_batches_tracked.
class BatchNormBase : public Module {
 public:
  BatchNormBase(int64_t num_features, double eps, std::optional<double> momentum, bool affine,
                bool track_running_stats, TensorOptions options);
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;

  int64_t num_features() const { return num_features_; }
  double eps() const { return eps_; }
  // nullopt: the cumulative moving average.
  std::optional<double> momentum() const { return momentum_; }
  // Undefined unless affine.
  Tensor& weight() { return weight_; }
  Tensor& bias() { return bias_; }
  // Undefined unless track_running_stats.
  Tensor& running_mean() { return running_mean_; }
  Tensor& running_var() { return running_var_; }
  Tensor& num_batches_tracked() { return num_batches_tracked_; }

 protected:
  // Throws unless input has a rank this layer accepts.
  virtual void check_input(const Tensor& input) const = 0;

 private:
  // Training forward with momentum = nullopt: batch statistics, then the cumulative average.
  Tensor cumulative_average_forward(const Tensor& input);
  // 1 / num_batches_tracked as a 0-dim tensor of the running statistics' dtype.
  Tensor reciprocal_count() const;

  int64_t num_features_;
  double eps_;
  std::optional<double> momentum_;
  bool affine_, track_running_stats_;
  Tensor weight_, bias_, running_mean_, running_var_, num_batches_tracked_;
};

// Batch norm over [N, C] or [N, C, L].
class BatchNorm1d : public BatchNormBase {
 public:
  explicit BatchNorm1d(int64_t num_features, double eps = 1e-5, std::optional<double> momentum = 0.1,
                       bool affine = true, bool track_running_stats = true, TensorOptions options = {})
      : BatchNormBase(num_features, eps, momentum, affine, track_running_stats, options) {}
  std::string type_name() const override { return "BatchNorm1d"; }

 protected:
  void check_input(const Tensor& input) const override;
};

// Batch norm over [N, C, H, W].
class BatchNorm2d : public BatchNormBase {
 public:
  explicit BatchNorm2d(int64_t num_features, double eps = 1e-5, std::optional<double> momentum = 0.1,
                       bool affine = true, bool track_running_stats = true, TensorOptions options = {})
      : BatchNormBase(num_features, eps, momentum, affine, track_running_stats, options) {}
  std::string type_name() const override { return "BatchNorm2d"; }

 protected:
  void check_input(const Tensor& input) const override;
};

// Layer norm over the trailing normalized_shape dims; weight (ones) and bias (zeros) of that shape.
class LayerNorm : public Module {
 public:
  explicit LayerNorm(Shape normalized_shape, double eps = 1e-5, bool elementwise_affine = true, bool bias = true,
                     TensorOptions options = {});
  Tensor forward(const Tensor& input) override;
  // residual + update and this norm of the sum as one op (tg::add_layer_norm), the normalized rows
  // in out_dtype (default: forward's dtype). No forward hooks run.
  AddLayerNormResult forward_add(const Tensor& residual, const Tensor& update,
                                 std::optional<DType> out_dtype = std::nullopt);
  std::string type_name() const override { return "LayerNorm"; }
  std::string extra_repr() const override;
  Tensor& weight() { return weight_; }
  Tensor& bias() { return bias_; }

 private:
  Shape normalized_shape_;
  double eps_;
  Tensor weight_, bias_;
};

// Group norm over [N, C, *] with num_groups groups; weight (ones) and bias (zeros) [C] when affine.
class GroupNorm : public Module {
 public:
  GroupNorm(int64_t num_groups, int64_t num_channels, double eps = 1e-5, bool affine = true,
            TensorOptions options = {});
  Tensor forward(const Tensor& input) override;
  std::string type_name() const override { return "GroupNorm"; }
  std::string extra_repr() const override;
  Tensor& weight() { return weight_; }
  Tensor& bias() { return bias_; }

 private:
  int64_t num_groups_, num_channels_;
  double eps_;
  Tensor weight_, bias_;
};

}  // namespace tg::nn
