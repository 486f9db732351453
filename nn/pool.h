// Pooling layers: MaxPool2d, AvgPool2d, AdaptiveAvgPool2d (PyTorch's options).
#pragma once

#include "nn/module.h"

namespace tg::nn {

// max_pool2d with fixed options; stride {} means stride = kernel_size.
class MaxPool2d : public Module {
 public:
  explicit MaxPool2d(Shape kernel_size, Shape stride = {}, Shape padding = {0}, Shape dilation = {1},
                     bool ceil_mode = false);
  Tensor forward(const Tensor& input) override;
  std::string type_name() const override { return "MaxPool2d"; }
  std::string extra_repr() const override;

 private:
  Shape kernel_size_, stride_, padding_, dilation_;
  bool ceil_mode_;
};

// avg_pool2d with fixed options; stride {} means stride = kernel_size.
class AvgPool2d : public Module {
 public:
  explicit AvgPool2d(Shape kernel_size, Shape stride = {}, Shape padding = {0}, bool ceil_mode = false,
                     bool count_include_pad = true);
  Tensor forward(const Tensor& input) override;
  std::string type_name() const override { return "AvgPool2d"; }
  std::string extra_repr() const override;

 private:
  Shape kernel_size_, stride_, padding_;
  bool ceil_mode_, count_include_pad_;
};

// adaptive_avg_pool2d to a fixed output_size ({1} or {1, 1} for global average pooling).
class AdaptiveAvgPool2d : public Module {
 public:
  explicit AdaptiveAvgPool2d(Shape output_size);
  Tensor forward(const Tensor& input) override;
  std::string type_name() const override { return "AdaptiveAvgPool2d"; }
  std::string extra_repr() const override;

 private:
  Shape output_size_;
};

}  // namespace tg::nn
