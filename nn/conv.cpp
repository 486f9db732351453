#include "nn/conv.h"

#include <cmath>

#include "nn/init.h"
#include "ops/factory/factory.h"
#include "ops/shape/pad.h"
#include "ops/shape/view.h"

namespace tg::nn {
namespace {

// `v` as `spatial` values (one value repeats).
Shape per_dim(const char* name, const char* what, const Shape& v, int spatial) {
  static const char* counts[] = {"one value", "one or two values", "one or three values"};
  TG_CHECK(v.size() == 1 || static_cast<int>(v.size()) == spatial, "[", name, "] expected ", what, " as ",
           counts[spatial - 1], ", got ", shape_str(v));
  return v.size() == 1 ? Shape(static_cast<size_t>(spatial), v[0]) : v;
}

std::string list_str(const Shape& v) {
  std::string s = "(";
  for (size_t i = 0; i < v.size(); ++i) {
    if (i > 0) s += ", ";
    s += std::to_string(v[i]);
  }
  return s + (v.size() == 1 ? ",)" : ")");
}

}  // namespace

ConvNd::ConvNd(const char* name, int spatial, bool transposed, int64_t in_channels, int64_t out_channels,
               Shape kernel_size, Shape stride, ConvPadding padding, Shape output_padding, Shape dilation,
               int64_t groups, bool bias, std::string padding_mode, TensorOptions options)
    : name_(name),
      spatial_(spatial),
      transposed_(transposed),
      in_channels_(in_channels),
      out_channels_(out_channels),
      groups_(groups),
      kernel_size_(per_dim(name, "kernel_size", kernel_size, spatial)),
      stride_(per_dim(name, "stride", stride, spatial)),
      output_padding_(per_dim(name, "output_padding", output_padding, spatial)),
      dilation_(per_dim(name, "dilation", dilation, spatial)),
      padding_(std::move(padding)),
      padding_mode_(std::move(padding_mode)) {
  TG_CHECK(in_channels > 0 && out_channels > 0, "[", name, "] in_channels and out_channels must be positive, got ",
           in_channels, " and ", out_channels);
  TG_CHECK(groups > 0, "[", name, "] groups must be positive, got ", groups);
  TG_CHECK(in_channels % groups == 0, "[", name, "] in_channels (", in_channels, ") must be divisible by groups (",
           groups, ")");
  TG_CHECK(out_channels % groups == 0, "[", name, "] out_channels (", out_channels, ") must be divisible by groups (",
           groups, ")");
  for (int64_t k : kernel_size_) TG_CHECK(k > 0, "[", name, "] kernel_size must be positive, got ", shape_str(kernel_size));
  TG_CHECK(padding_mode_ == "zeros" || padding_mode_ == "reflect" || padding_mode_ == "replicate" ||
               padding_mode_ == "circular",
           "[", name, "] padding_mode must be one of \"zeros\", \"reflect\", \"replicate\" or \"circular\", got \"",
           padding_mode_, "\"");
  TG_CHECK(!transposed || padding_mode_ == "zeros", "[", name, "] only \"zeros\" padding mode is supported, got \"",
           padding_mode_, "\"");
  if (const auto* amounts = std::get_if<Shape>(&padding_.value)) padding_.value = per_dim(name, "padding", *amounts, spatial);
  options.dtype = options.dtype_or(kFloat32);
  TG_CHECK(is_floating(*options.dtype), "[", name, "] parameters need a floating dtype, got ",
           dtype_name(*options.dtype));
  options.requires_grad = false;
  Shape wsizes = transposed ? Shape{in_channels, out_channels / groups} : Shape{out_channels, in_channels / groups};
  wsizes.insert(wsizes.end(), kernel_size_.begin(), kernel_size_.end());
  Tensor w = empty(wsizes, options);
  init::kaiming_uniform_(w, std::sqrt(5.0));
  weight_ = register_parameter("weight", w);
  if (bias) {
    const int64_t fan_in = init::fan_in_and_fan_out(w).first;
    Tensor b = empty({out_channels}, options);
    const double bound = fan_in > 0 ? 1.0 / std::sqrt(static_cast<double>(fan_in)) : 0.0;
    init::uniform_(b, -bound, bound);
    bias_ = register_parameter("bias", b);
  }
}

std::pair<Tensor, ConvPadding> ConvNd::padded(const Tensor& input) const {
  if (padding_mode_ == "zeros") return {input, padding_};
  Shape amounts;  // (before, after) per spatial dim, last dim first, as F.pad takes them
  const auto* mode = std::get_if<std::string>(&padding_.value);
  if (mode && *mode == "valid") return {input, padding_};
  for (int d = spatial_ - 1; d >= 0; --d) {
    const size_t i = static_cast<size_t>(d);
    if (mode) {  // "same": the total padding split as PyTorch does, the odd one after
      const int64_t total = dilation_[i] * (kernel_size_[i] - 1);
      amounts.push_back(total / 2);
      amounts.push_back(total - total / 2);
    } else {
      const int64_t p = std::get<Shape>(padding_.value)[i];
      amounts.push_back(p);
      amounts.push_back(p);
    }
  }
  return {pad(input, amounts, padding_mode_), ConvPadding(0)};
}

Shape ConvNd::output_padding_for(const Tensor& input, const Shape& output_size) const {
  const size_t n = static_cast<size_t>(spatial_);
  TG_CHECK(output_size.size() == n || output_size.size() == n + 2, "[", name_, "] output_size must have ", n, " or ",
           n + 2, " elements, got ", shape_str(output_size));
  TG_CHECK(input.dim() >= spatial_, "[", name_, "] input of shape ", shape_str(input.sizes()), " has fewer than ",
           spatial_, " dims");
  const Shape& pad_amounts = std::get<Shape>(padding_.value);
  Shape out;
  for (size_t d = 0; d < n; ++d) {
    const int64_t in = input.size(input.dim() - spatial_ + static_cast<int64_t>(d));
    const int64_t min_size = (in - 1) * stride_[d] - 2 * pad_amounts[d] + dilation_[d] * (kernel_size_[d] - 1) + 1;
    const int64_t want = output_size[output_size.size() - n + d];
    TG_CHECK(want >= min_size && want <= min_size + stride_[d] - 1, "[", name_, "] requested output_size ",
             shape_str(output_size), " is not reachable: dim ", d, " must be between ", min_size, " and ",
             min_size + stride_[d] - 1, ", got ", want);
    out.push_back(want - min_size);
  }
  return out;
}

std::string ConvNd::extra_repr() const {
  std::string s = std::to_string(in_channels_) + ", " + std::to_string(out_channels_) +
                  ", kernel_size=" + list_str(kernel_size_) + ", stride=" + list_str(stride_);
  if (const auto* mode = std::get_if<std::string>(&padding_.value)) s += ", padding=" + *mode;
  else s += ", padding=" + list_str(std::get<Shape>(padding_.value));
  if (dilation_ != Shape(dilation_.size(), 1)) s += ", dilation=" + list_str(dilation_);
  if (output_padding_ != Shape(output_padding_.size(), 0)) s += ", output_padding=" + list_str(output_padding_);
  if (groups_ != 1) s += ", groups=" + std::to_string(groups_);
  if (!bias_.defined()) s += ", bias=False";
  if (padding_mode_ != "zeros") s += ", padding_mode=" + padding_mode_;
  return s;
}

Conv1d::Conv1d(int64_t in_channels, int64_t out_channels, int64_t kernel_size, int64_t stride, ConvPadding padding,
               int64_t dilation, int64_t groups, bool bias, TensorOptions options)
    : Conv1d(in_channels, out_channels, kernel_size, stride, std::move(padding), dilation, groups, bias, "zeros",
             options) {}

Conv1d::Conv1d(int64_t in_channels, int64_t out_channels, int64_t kernel_size, int64_t stride, ConvPadding padding,
               int64_t dilation, int64_t groups, bool bias, std::string padding_mode, TensorOptions options)
    : ConvNd("Conv1d", 1, false, in_channels, out_channels, {kernel_size}, {stride}, std::move(padding), {0},
             {dilation}, groups, bias, std::move(padding_mode), options) {}

Tensor Conv1d::forward(const Tensor& input) {
  auto [x, p] = padded(input);
  return conv1d(x, weight_, bias_, stride_, p, dilation_, groups_);
}

Conv2d::Conv2d(int64_t in_channels, int64_t out_channels, Shape kernel_size, Shape stride, ConvPadding padding,
               Shape dilation, int64_t groups, bool bias, TensorOptions options)
    : Conv2d(in_channels, out_channels, std::move(kernel_size), std::move(stride), std::move(padding),
             std::move(dilation), groups, bias, "zeros", options) {}

Conv2d::Conv2d(int64_t in_channels, int64_t out_channels, Shape kernel_size, Shape stride, ConvPadding padding,
               Shape dilation, int64_t groups, bool bias, std::string padding_mode, TensorOptions options)
    : ConvNd("Conv2d", 2, false, in_channels, out_channels, std::move(kernel_size), std::move(stride),
             std::move(padding), {0}, std::move(dilation), groups, bias, std::move(padding_mode), options) {}

Tensor Conv2d::forward(const Tensor& input) {
  auto [x, p] = padded(input);
  return conv2d(x, weight_, bias_, stride_, p, dilation_, groups_);
}

Conv3d::Conv3d(int64_t in_channels, int64_t out_channels, Shape kernel_size, Shape stride, ConvPadding padding,
               Shape dilation, int64_t groups, bool bias, std::string padding_mode, TensorOptions options)
    : ConvNd("Conv3d", 3, false, in_channels, out_channels, std::move(kernel_size), std::move(stride),
             std::move(padding), {0}, std::move(dilation), groups, bias, std::move(padding_mode), options) {}

Tensor Conv3d::forward(const Tensor& input) {
  auto [x, p] = padded(input);
  return conv3d(x, weight_, bias_, stride_, p, dilation_, groups_);
}

ConvTranspose1d::ConvTranspose1d(int64_t in_channels, int64_t out_channels, int64_t kernel_size, int64_t stride,
                                 int64_t padding, int64_t output_padding, int64_t groups, bool bias, int64_t dilation,
                                 TensorOptions options)
    : ConvNd("ConvTranspose1d", 1, true, in_channels, out_channels, {kernel_size}, {stride}, Shape{padding},
             {output_padding}, {dilation}, groups, bias, "zeros", options) {}

Tensor ConvTranspose1d::forward(const Tensor& input, const Shape& output_size) {
  return conv_transpose1d(input, weight_, bias_, stride_, std::get<Shape>(padding_.value),
                          output_padding_for(input, output_size), groups_, dilation_);
}

Tensor ConvTranspose1d::forward(const Tensor& input) {
  return conv_transpose1d(input, weight_, bias_, stride_, std::get<Shape>(padding_.value), output_padding_, groups_,
                          dilation_);
}

ConvTranspose2d::ConvTranspose2d(int64_t in_channels, int64_t out_channels, Shape kernel_size, Shape stride,
                                 Shape padding, Shape output_padding, int64_t groups, bool bias, Shape dilation,
                                 TensorOptions options)
    : ConvNd("ConvTranspose2d", 2, true, in_channels, out_channels, std::move(kernel_size), std::move(stride),
             std::move(padding), std::move(output_padding), std::move(dilation), groups, bias, "zeros", options) {}

Tensor ConvTranspose2d::forward(const Tensor& input, const Shape& output_size) {
  return conv_transpose2d(input, weight_, bias_, stride_, std::get<Shape>(padding_.value),
                          output_padding_for(input, output_size), groups_, dilation_);
}

Tensor ConvTranspose2d::forward(const Tensor& input) {
  return conv_transpose2d(input, weight_, bias_, stride_, std::get<Shape>(padding_.value), output_padding_, groups_,
                          dilation_);
}

ConvTranspose3d::ConvTranspose3d(int64_t in_channels, int64_t out_channels, Shape kernel_size, Shape stride,
                                 Shape padding, Shape output_padding, int64_t groups, bool bias, Shape dilation,
                                 TensorOptions options)
    : ConvNd("ConvTranspose3d", 3, true, in_channels, out_channels, std::move(kernel_size), std::move(stride),
             std::move(padding), std::move(output_padding), std::move(dilation), groups, bias, "zeros", options) {}

Tensor ConvTranspose3d::forward(const Tensor& input, const Shape& output_size) {
  return conv_transpose3d(input, weight_, bias_, stride_, std::get<Shape>(padding_.value),
                          output_padding_for(input, output_size), groups_, dilation_);
}

Tensor ConvTranspose3d::forward(const Tensor& input) {
  return conv_transpose3d(input, weight_, bias_, stride_, std::get<Shape>(padding_.value), output_padding_, groups_,
                          dilation_);
}

Tensor Flatten::forward(const Tensor& input) { return flatten(input, start_dim_, end_dim_); }

std::string Flatten::extra_repr() const {
  return "start_dim=" + std::to_string(start_dim_) + ", end_dim=" + std::to_string(end_dim_);
}

Tensor Unflatten::forward(const Tensor& input) { return unflatten(input, dim_, sizes_); }

std::string Unflatten::extra_repr() const { return "dim=" + std::to_string(dim_) + ", unflattened_size=" + list_str(sizes_); }

}  // namespace tg::nn
