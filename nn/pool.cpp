// Pooling layers: options held by the module, computation in ops/pool.
#include "nn/pool.h"

#include "ops/conv/pool.h"

namespace tg::nn {

MaxPoolNd::MaxPoolNd(int nd, Shape kernel_size, Shape stride, Shape padding, Shape dilation, bool ceil_mode)
    : nd_(nd), kernel_size_(std::move(kernel_size)), stride_(std::move(stride)), padding_(std::move(padding)),
      dilation_(std::move(dilation)), ceil_mode_(ceil_mode) {}

Tensor MaxPoolNd::forward(const Tensor& input) {
  auto* fn = nd_ == 1 ? max_pool1d : nd_ == 2 ? max_pool2d : max_pool3d;
  return fn(input, kernel_size_, stride_, padding_, dilation_, ceil_mode_);
}

std::string MaxPoolNd::extra_repr() const {
  return "kernel_size=" + shape_str(kernel_size_) + ", stride=" + shape_str(stride_.empty() ? kernel_size_ : stride_) +
         ", padding=" + shape_str(padding_) + ", dilation=" + shape_str(dilation_) +
         ", ceil_mode=" + (ceil_mode_ ? "true" : "false");
}

AvgPoolNd::AvgPoolNd(int nd, Shape kernel_size, Shape stride, Shape padding, bool ceil_mode, bool count_include_pad,
                     std::optional<int64_t> divisor_override)
    : nd_(nd), kernel_size_(std::move(kernel_size)), stride_(std::move(stride)), padding_(std::move(padding)),
      ceil_mode_(ceil_mode), count_include_pad_(count_include_pad), divisor_override_(divisor_override) {}

Tensor AvgPoolNd::forward(const Tensor& input) {
  if (nd_ == 1) return avg_pool1d(input, kernel_size_, stride_, padding_, ceil_mode_, count_include_pad_);
  auto* fn = nd_ == 2 ? avg_pool2d : avg_pool3d;
  return fn(input, kernel_size_, stride_, padding_, ceil_mode_, count_include_pad_, divisor_override_);
}

std::string AvgPoolNd::extra_repr() const {
  std::string s = "kernel_size=" + shape_str(kernel_size_) +
                  ", stride=" + shape_str(stride_.empty() ? kernel_size_ : stride_) + ", padding=" + shape_str(padding_);
  if (divisor_override_) s += ", divisor_override=" + std::to_string(*divisor_override_);
  return s;
}

Tensor AdaptiveAvgPoolNd::forward(const Tensor& input) {
  auto* fn = nd_ == 1 ? adaptive_avg_pool1d : nd_ == 2 ? adaptive_avg_pool2d : adaptive_avg_pool3d;
  return fn(input, output_size_);
}

std::string AdaptiveAvgPoolNd::extra_repr() const { return "output_size=" + shape_str(output_size_); }

}  // namespace tg::nn
