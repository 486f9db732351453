// Convolution layers (Conv1d/2d/3d, ConvTranspose1d/2d/3d) initialized as PyTorch's, Flatten and
// Unflatten.
#pragma once

#include <string>
#include <utility>

#include "nn/module.h"
#include "ops/conv/conv.h"

namespace tg::nn {

// Shared state of the convolution layers: weight [out, in/groups, *kernel] ([in, out/groups, *kernel]
// when transposed), optional bias [out], and geometry.
class ConvNd : public Module {
 public:
  std::string extra_repr() const override;
  Tensor& weight() { return weight_; }
  // Undefined when built with bias = false.
  Tensor& bias() { return bias_; }
  int64_t in_channels() const { return in_channels_; }
  int64_t out_channels() const { return out_channels_; }
  const std::string& padding_mode() const { return padding_mode_; }

 protected:
  // `spatial` is 1, 2 or 3; kernel_size/stride/dilation take one value or one per spatial dim;
  // padding_mode is "zeros", "reflect", "replicate" or "circular" (transposed: "zeros" only).
  ConvNd(const char* name, int spatial, bool transposed, int64_t in_channels, int64_t out_channels, Shape kernel_size,
         Shape stride, ConvPadding padding, Shape output_padding, Shape dilation, int64_t groups, bool bias,
         std::string padding_mode, TensorOptions options);
  // The input padded as padding_mode says (PyTorch's F.pad with _reversed_padding_repeated_twice), and
  // the padding left for the convolution itself (0 after a non-zeros mode).
  std::pair<Tensor, ConvPadding> padded(const Tensor& input) const;
  // The output_padding that makes a transposed convolution of `input` produce `output_size` (its last
  // `spatial` entries), checked to lie within the sizes the stride allows (PyTorch's _output_padding).
  Shape output_padding_for(const Tensor& input, const Shape& output_size) const;

  const char* name_;
  int spatial_;
  bool transposed_;
  int64_t in_channels_, out_channels_, groups_;
  Shape kernel_size_, stride_, output_padding_, dilation_;
  ConvPadding padding_;
  std::string padding_mode_;
  Tensor weight_, bias_;
};

// 1-D convolution over [N, C_in, L] (or [C_in, L]) with torch.nn.Conv1d's options and init:
// weight ~ kaiming_uniform(a = sqrt(5)), bias ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
class Conv1d : public ConvNd {
 public:
  Conv1d(int64_t in_channels, int64_t out_channels, int64_t kernel_size, int64_t stride = 1, ConvPadding padding = 0,
         int64_t dilation = 1, int64_t groups = 1, bool bias = true, TensorOptions options = {});
  // With a padding_mode ("zeros", "reflect", "replicate", "circular"), in PyTorch's argument order.
  Conv1d(int64_t in_channels, int64_t out_channels, int64_t kernel_size, int64_t stride, ConvPadding padding,
         int64_t dilation, int64_t groups, bool bias, std::string padding_mode, TensorOptions options = {});
  Tensor forward(const Tensor& input) override;
  std::string type_name() const override { return "Conv1d"; }
};

// 2-D convolution over [N, C_in, H, W] (or [C_in, H, W]) with torch.nn.Conv2d's options and init;
// kernel_size, stride and dilation take one value for both dims or two.
class Conv2d : public ConvNd {
 public:
  Conv2d(int64_t in_channels, int64_t out_channels, Shape kernel_size, Shape stride = {1}, ConvPadding padding = 0,
         Shape dilation = {1}, int64_t groups = 1, bool bias = true, TensorOptions options = {});
  // With a padding_mode ("zeros", "reflect", "replicate", "circular"), in PyTorch's argument order.
  Conv2d(int64_t in_channels, int64_t out_channels, Shape kernel_size, Shape stride, ConvPadding padding,
         Shape dilation, int64_t groups, bool bias, std::string padding_mode, TensorOptions options = {});
  Tensor forward(const Tensor& input) override;
  std::string type_name() const override { return "Conv2d"; }
};

// 3-D convolution over [N, C_in, D, H, W] (or [C_in, D, H, W]) with torch.nn.Conv3d's options and
// init; kernel_size, stride and dilation take one value for all dims or three.
class Conv3d : public ConvNd {
 public:
  Conv3d(int64_t in_channels, int64_t out_channels, Shape kernel_size, Shape stride = {1}, ConvPadding padding = 0,
         Shape dilation = {1}, int64_t groups = 1, bool bias = true, std::string padding_mode = "zeros",
         TensorOptions options = {});
  Tensor forward(const Tensor& input) override;
  std::string type_name() const override { return "Conv3d"; }
};

// Transposed convolutions with torch.nn.ConvTranspose{1,2,3}d's options (PyTorch's argument order)
// and init; weight [in, out/groups, *kernel].
class ConvTranspose1d : public ConvNd {
 public:
  ConvTranspose1d(int64_t in_channels, int64_t out_channels, int64_t kernel_size, int64_t stride = 1,
                  int64_t padding = 0, int64_t output_padding = 0, int64_t groups = 1, bool bias = true,
                  int64_t dilation = 1, TensorOptions options = {});
  Tensor forward(const Tensor& input) override;
  // The forward with the output's spatial sizes given (they pick output_padding), as PyTorch's output_size.
  Tensor forward(const Tensor& input, const Shape& output_size);
  std::string type_name() const override { return "ConvTranspose1d"; }
};

class ConvTranspose2d : public ConvNd {
 public:
  ConvTranspose2d(int64_t in_channels, int64_t out_channels, Shape kernel_size, Shape stride = {1},
                  Shape padding = {0}, Shape output_padding = {0}, int64_t groups = 1, bool bias = true,
                  Shape dilation = {1}, TensorOptions options = {});
  Tensor forward(const Tensor& input) override;
  // The forward with the output's spatial sizes given (they pick output_padding), as PyTorch's output_size.
  Tensor forward(const Tensor& input, const Shape& output_size);
  std::string type_name() const override { return "ConvTranspose2d"; }
};

class ConvTranspose3d : public ConvNd {
 public:
  ConvTranspose3d(int64_t in_channels, int64_t out_channels, Shape kernel_size, Shape stride = {1},
                  Shape padding = {0}, Shape output_padding = {0}, int64_t groups = 1, bool bias = true,
                  Shape dilation = {1}, TensorOptions options = {});
  Tensor forward(const Tensor& input) override;
  // The forward with the output's spatial sizes given (they pick output_padding), as PyTorch's output_size.
  Tensor forward(const Tensor& input, const Shape& output_size);
  std::string type_name() const override { return "ConvTranspose3d"; }
};

// Flattens dims start_dim..end_dim into one (defaults keep the batch dim), as torch.nn.Flatten.
class Flatten : public Module {
 public:
  explicit Flatten(int64_t start_dim = 1, int64_t end_dim = -1) : start_dim_(start_dim), end_dim_(end_dim) {}
  Tensor forward(const Tensor& input) override;
  std::string type_name() const override { return "Flatten"; }
  std::string extra_repr() const override;

 private:
  int64_t start_dim_, end_dim_;
};

// Splits dim into `sizes` (one may be -1), as torch.nn.Unflatten; a view.
class Unflatten : public Module {
 public:
  Unflatten(int64_t dim, Shape sizes) : dim_(dim), sizes_(std::move(sizes)) {}
  Tensor forward(const Tensor& input) override;
  std::string type_name() const override { return "Unflatten"; }
  std::string extra_repr() const override;

 private:
  int64_t dim_;
  Shape sizes_;
};

}  // namespace tg::nn
