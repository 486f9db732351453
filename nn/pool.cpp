// Pooling layers: options held by the module, computation in ops/pool.
#include "nn/pool.h"

#include "ops/pool.h"

namespace tg::nn {

MaxPool2d::MaxPool2d(Shape kernel_size, Shape stride, Shape padding, Shape dilation, bool ceil_mode)
    : kernel_size_(std::move(kernel_size)), stride_(std::move(stride)), padding_(std::move(padding)),
      dilation_(std::move(dilation)), ceil_mode_(ceil_mode) {}

Tensor MaxPool2d::forward(const Tensor& input) {
  return max_pool2d(input, kernel_size_, stride_, padding_, dilation_, ceil_mode_);
}

std::string MaxPool2d::extra_repr() const {
  return "kernel_size=" + shape_str(kernel_size_) + ", stride=" + shape_str(stride_.empty() ? kernel_size_ : stride_) +
         ", padding=" + shape_str(padding_) + ", dilation=" + shape_str(dilation_) +
         ", ceil_mode=" + (ceil_mode_ ? "true" : "false");
}

AvgPool2d::AvgPool2d(Shape kernel_size, Shape stride, Shape padding, bool ceil_mode, bool count_include_pad)
    : kernel_size_(std::move(kernel_size)), stride_(std::move(stride)), padding_(std::move(padding)),
      ceil_mode_(ceil_mode), count_include_pad_(count_include_pad) {}

Tensor AvgPool2d::forward(const Tensor& input) {
  return avg_pool2d(input, kernel_size_, stride_, padding_, ceil_mode_, count_include_pad_);
}

std::string AvgPool2d::extra_repr() const {
  return "kernel_size=" + shape_str(kernel_size_) + ", stride=" + shape_str(stride_.empty() ? kernel_size_ : stride_) +
         ", padding=" + shape_str(padding_);
}

AdaptiveAvgPool2d::AdaptiveAvgPool2d(Shape output_size) : output_size_(std::move(output_size)) {}

Tensor AdaptiveAvgPool2d::forward(const Tensor& input) { return adaptive_avg_pool2d(input, output_size_); }

std::string AdaptiveAvgPool2d::extra_repr() const { return "output_size=" + shape_str(output_size_); }

}  // namespace tg::nn
