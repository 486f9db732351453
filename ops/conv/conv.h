// Convolutions (conv1d/2d/3d) and transposed convolutions (conv_transpose1d/2d/3d) with gradients
// for input, weight and bias; the two backward products are ops of their own whose gradients are
// convolutions again, so every order of derivative exists.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <variant>

#include "tensor/tensor.h"

namespace tg {

// Padding of a convolution: explicit amounts per spatial dim, or "same" / "valid" as in PyTorch.
struct ConvPadding {
  std::variant<Shape, std::string> value;
  ConvPadding(int64_t p) : value(Shape{p}) {}  // NOLINT: an int pads every spatial dim alike
  ConvPadding(int p) : value(Shape{p}) {}  // NOLINT: (also keeps a literal 0 from meaning a null mode)
  ConvPadding(Shape p) : value(std::move(p)) {}  // NOLINT
  ConvPadding(std::initializer_list<int64_t> p) : value(Shape(p)) {}
  ConvPadding(const char* mode) : value(std::string(mode)) {}  // NOLINT
  ConvPadding(std::string mode) : value(std::move(mode)) {}  // NOLINT
};

// The geometry of a 2-D or 3-D convolution shared by the forward and both backward ops (1-D
// convolutions run as 2-D ones over a height of 1). Entries past `spatial` are unused.
struct ConvParams {
  int spatial = 2;  // 2 or 3
  std::array<int64_t, 3> stride{1, 1, 1};
  std::array<int64_t, 3> padding{0, 0, 0};
  std::array<int64_t, 3> dilation{1, 1, 1};
  int64_t groups = 1;
  // "stride=[1, 1], padding=[0, 0], dilation=[1, 1], groups=1" for printing.
  std::string str() const;
};
// The name the 2-D convolutions had before 3-D ones existed.
using Conv2dParams = ConvParams;

// Cross-correlation of input [N, C_in, L] (or unbatched [C_in, L]) with weight [C_out, C_in/groups, K],
// plus bias [C_out] when defined.
Tensor conv1d(const Tensor& input, const Tensor& weight, const Tensor& bias = {}, Shape stride = {1},
              ConvPadding padding = 0, Shape dilation = {1}, int64_t groups = 1);
// Cross-correlation of input [N, C_in, H, W] (or unbatched [C_in, H, W]) with weight
// [C_out, C_in/groups, kH, kW], plus bias [C_out] when defined. stride/dilation take one value for
// both dims or two; padding "same" requires stride 1 and pads asymmetrically when needed.
Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias = {}, Shape stride = {1},
              ConvPadding padding = 0, Shape dilation = {1}, int64_t groups = 1);

// Cross-correlation of input [N, C_in, D, H, W] (or unbatched [C_in, D, H, W]) with weight
// [C_out, C_in/groups, kD, kH, kW], plus bias [C_out] when defined; lists take one value or three.
Tensor conv3d(const Tensor& input, const Tensor& weight, const Tensor& bias = {}, Shape stride = {1},
              ConvPadding padding = 0, Shape dilation = {1}, int64_t groups = 1);

// Transposed convolutions (the gradient of conv w.r.t. its input, as a layer) of input
// [N, C_in, *spatial] (or unbatched) with weight [C_in, C_out/groups, *kernel], plus bias [C_out];
// output extent (in - 1) * stride - 2 * padding + dilation * (k - 1) + output_padding + 1.
// Arguments in PyTorch's order; lists take one value or one per spatial dim.
Tensor conv_transpose1d(const Tensor& input, const Tensor& weight, const Tensor& bias = {}, Shape stride = {1},
                        Shape padding = {0}, Shape output_padding = {0}, int64_t groups = 1, Shape dilation = {1});
Tensor conv_transpose2d(const Tensor& input, const Tensor& weight, const Tensor& bias = {}, Shape stride = {1},
                        Shape padding = {0}, Shape output_padding = {0}, int64_t groups = 1, Shape dilation = {1});
Tensor conv_transpose3d(const Tensor& input, const Tensor& weight, const Tensor& bias = {}, Shape stride = {1},
                        Shape padding = {0}, Shape output_padding = {0}, int64_t groups = 1, Shape dilation = {1});

// The gradient of a 2-D or 3-D convolution w.r.t. its input, given grad_output and weight (a
// transposed convolution producing `input_sizes`).
Tensor conv2d_backward_input(const Tensor& grad_output, const Tensor& weight, const Shape& input_sizes,
                             const ConvParams& params);
// The gradient of a 2-D or 3-D convolution w.r.t. its weight, given grad_output and input.
Tensor conv2d_backward_weight(const Tensor& grad_output, const Tensor& input, const Shape& weight_sizes,
                              const ConvParams& params);

}  // namespace tg
