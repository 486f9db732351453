// Pooling layers over 1, 2 or 3 spatial dims: MaxPool{1,2,3}d, AvgPool{1,2,3}d,
// AdaptiveAvgPool{1,2,3}d (PyTorch's options and defaults).
#pragma once

#include <cstdint>
#include <optional>

#include "nn/module.h"

namespace tg::nn {

// max_pool{nd}d with fixed options; stride {} means stride = kernel_size.
class MaxPoolNd : public Module {
 public:
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;

 protected:
  MaxPoolNd(int nd, Shape kernel_size, Shape stride, Shape padding, Shape dilation, bool ceil_mode);

 private:
  int nd_;
  Shape kernel_size_, stride_, padding_, dilation_;
  bool ceil_mode_;
};

// Max pooling over [N, C, L] or [C, L].
class MaxPool1d : public MaxPoolNd {
 public:
  explicit MaxPool1d(Shape kernel_size, Shape stride = {}, Shape padding = {0}, Shape dilation = {1},
                     bool ceil_mode = false)
      : MaxPoolNd(1, std::move(kernel_size), std::move(stride), std::move(padding), std::move(dilation), ceil_mode) {}
  std::string type_name() const override { return "MaxPool1d"; }
};

// Max pooling over [N, C, H, W] or [C, H, W].
class MaxPool2d : public MaxPoolNd {
 public:
  explicit MaxPool2d(Shape kernel_size, Shape stride = {}, Shape padding = {0}, Shape dilation = {1},
                     bool ceil_mode = false)
      : MaxPoolNd(2, std::move(kernel_size), std::move(stride), std::move(padding), std::move(dilation), ceil_mode) {}
  std::string type_name() const override { return "MaxPool2d"; }
};

// Max pooling over [N, C, D, H, W] or [C, D, H, W].
class MaxPool3d : public MaxPoolNd {
 public:
  explicit MaxPool3d(Shape kernel_size, Shape stride = {}, Shape padding = {0}, Shape dilation = {1},
                     bool ceil_mode = false)
      : MaxPoolNd(3, std::move(kernel_size), std::move(stride), std::move(padding), std::move(dilation), ceil_mode) {}
  std::string type_name() const override { return "MaxPool3d"; }
};

// avg_pool{nd}d with fixed options; stride {} means stride = kernel_size.
class AvgPoolNd : public Module {
 public:
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;

 protected:
  AvgPoolNd(int nd, Shape kernel_size, Shape stride, Shape padding, bool ceil_mode, bool count_include_pad,
            std::optional<int64_t> divisor_override);

 private:
  int nd_;
  Shape kernel_size_, stride_, padding_;
  bool ceil_mode_, count_include_pad_;
  std::optional<int64_t> divisor_override_;
};

// Average pooling over [N, C, L] or [C, L] (no divisor_override, as in PyTorch).
class AvgPool1d : public AvgPoolNd {
 public:
  explicit AvgPool1d(Shape kernel_size, Shape stride = {}, Shape padding = {0}, bool ceil_mode = false,
                     bool count_include_pad = true)
      : AvgPoolNd(1, std::move(kernel_size), std::move(stride), std::move(padding), ceil_mode, count_include_pad,
                  std::nullopt) {}
  std::string type_name() const override { return "AvgPool1d"; }
};

// Average pooling over [N, C, H, W] or [C, H, W].
class AvgPool2d : public AvgPoolNd {
 public:
  explicit AvgPool2d(Shape kernel_size, Shape stride = {}, Shape padding = {0}, bool ceil_mode = false,
                     bool count_include_pad = true, std::optional<int64_t> divisor_override = std::nullopt)
      : AvgPoolNd(2, std::move(kernel_size), std::move(stride), std::move(padding), ceil_mode, count_include_pad,
                  divisor_override) {}
  std::string type_name() const override { return "AvgPool2d"; }
};

// Average pooling over [N, C, D, H, W] or [C, D, H, W].
class AvgPool3d : public AvgPoolNd {
 public:
  explicit AvgPool3d(Shape kernel_size, Shape stride = {}, Shape padding = {0}, bool ceil_mode = false,
                     bool count_include_pad = true, std::optional<int64_t> divisor_override = std::nullopt)
      : AvgPoolNd(3, std::move(kernel_size), std::move(stride), std::move(padding), ceil_mode, count_include_pad,
                  divisor_override) {}
  std::string type_name() const override { return "AvgPool3d"; }
};

// adaptive_avg_pool{nd}d to a fixed output_size ({1} for global average pooling).
class AdaptiveAvgPoolNd : public Module {
 public:
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;

 protected:
  AdaptiveAvgPoolNd(int nd, Shape output_size) : nd_(nd), output_size_(std::move(output_size)) {}

 private:
  int nd_;
  Shape output_size_;
};

// Adaptive average pooling over [N, C, L] or [C, L].
class AdaptiveAvgPool1d : public AdaptiveAvgPoolNd {
 public:
  explicit AdaptiveAvgPool1d(Shape output_size) : AdaptiveAvgPoolNd(1, std::move(output_size)) {}
  std::string type_name() const override { return "AdaptiveAvgPool1d"; }
};

// Adaptive average pooling over [N, C, H, W] or [C, H, W].
class AdaptiveAvgPool2d : public AdaptiveAvgPoolNd {
 public:
  explicit AdaptiveAvgPool2d(Shape output_size) : AdaptiveAvgPoolNd(2, std::move(output_size)) {}
  std::string type_name() const override { return "AdaptiveAvgPool2d"; }
};

// Adaptive average pooling over [N, C, D, H, W] or [C, D, H, W].
class AdaptiveAvgPool3d : public AdaptiveAvgPoolNd {
 public:
  explicit AdaptiveAvgPool3d(Shape output_size) : AdaptiveAvgPoolNd(3, std::move(output_size)) {}
  std::string type_name() const override { return "AdaptiveAvgPool3d"; }
};

}  // namespace tg::nn
