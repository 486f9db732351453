// Transposed convolutions as PyTorch's conv_transpose{1,2,3}d: the forward is the input gradient of
// the convolution with the same weight and geometry (the conv*_backward_input op, cuDNN's backward
// data, oneDNN's or im2col's col2im on the CPU), so its gradients are that op's: a convolution for
// the input and the weight-gradient op for the weight.
#include "ops/conv/conv.h"
#include "ops/conv/conv_kernels.h"
#include "ops/core/autocast.h"
#include "ops/elementwise/binary.h"
#include "ops/shape/view.h"

namespace tg {
namespace {

std::string list_str(const std::array<int64_t, 3>& a, int first, int n) {
  return shape_str(Shape(a.begin() + first, a.begin() + first + n));
}

Tensor conv_transpose_nd(const char* op, int spatial, Tensor input, Tensor weight, const Tensor& bias,
                         const Shape& stride, const Shape& padding, const Shape& output_padding, int64_t groups,
                         const Shape& dilation) {
  input = autocast::to_low(input);
  weight = autocast::to_low(weight);
  const Tensor b = autocast::to_low(bias);
  TG_CHECK(input.defined() && weight.defined(), "[", op, "] got an undefined input or weight");
  const int64_t batched_dim = spatial + 2;
  TG_CHECK(input.dim() == batched_dim || input.dim() == batched_dim - 1, "[", op, "] expected ", batched_dim - 1,
           "-D (unbatched) or ", batched_dim, "-D (batched) input, got input of shape ", shape_str(input.sizes()));
  TG_CHECK(weight.dim() == batched_dim, "[", op, "] expected a ", batched_dim,
           "-D weight [C_in, C_out/groups, *kernel], got shape ", shape_str(weight.sizes()));
  TG_CHECK(groups > 0, "[", op, "] expected positive groups, got ", groups);
  const bool unbatched = input.dim() == batched_dim - 1;
  if (unbatched) input = unsqueeze(input, 0);
  TG_CHECK(input.size(1) == weight.size(0), "[", op, "] expected input of shape ", shape_str(input.sizes()),
           " to have ", weight.size(0), " channels (weight ", shape_str(weight.sizes()), " is [C_in, C_out/groups, ",
           "*kernel]), but got ", input.size(1), " channels");
  TG_CHECK(weight.size(0) % groups == 0, "[", op, "] expected in_channels (", weight.size(0),
           ") to be divisible by groups (", groups, ")");
  const int64_t out_channels = weight.size(1) * groups;
  if (b.defined())
    TG_CHECK(b.dim() == 1 && b.size(0) == out_channels, "[", op, "] expected bias of shape [", out_channels,
             "] (out_channels), got ", shape_str(b.sizes()));
  ConvParams p;
  p.spatial = spatial == 3 ? 3 : 2;
  p.groups = groups;
  p.stride = conv_detail::per_dim(op, "stride", stride, spatial, 1);
  p.padding = conv_detail::per_dim(op, "padding", padding, spatial, 0);
  p.dilation = conv_detail::per_dim(op, "dilation", dilation, spatial, 1);
  const std::array<int64_t, 3> extra = conv_detail::per_dim(op, "output_padding", output_padding, spatial, 0);
  const int first = spatial == 1 ? 1 : 0;  // where the caller's dims sit in the 2-D/3-D lists
  if (spatial == 1) {
    input = unsqueeze(input, 2);
    weight = unsqueeze(weight, 2);
  }
  Shape out_sizes{input.size(0), out_channels};
  for (int d = 0; d < p.spatial; ++d) {
    TG_CHECK(p.stride[d] > 0, "[", op, "] expected positive stride, got ", list_str(p.stride, first, spatial));
    TG_CHECK(p.padding[d] >= 0, "[", op, "] expected non-negative padding, got ", list_str(p.padding, first, spatial));
    TG_CHECK(p.dilation[d] > 0, "[", op, "] expected positive dilation, got ", list_str(p.dilation, first, spatial));
    TG_CHECK(extra[d] >= 0 && (extra[d] < p.stride[d] || extra[d] < p.dilation[d]), "[", op, "] output_padding ",
             list_str(extra, first, spatial), " must be smaller than either stride ", list_str(p.stride, first, spatial),
             " or dilation ", list_str(p.dilation, first, spatial));
    // PyTorch also takes stride <= output_padding < dilation; that output is not a convolution's input
    // gradient in shape, so it is refused rather than computed differently.
    TG_CHECK(extra[d] < p.stride[d], "[", op, "] output_padding ", list_str(extra, first, spatial),
             " at least the stride ", list_str(p.stride, first, spatial), " is not supported");
    const int64_t in = input.size(2 + d);
    TG_CHECK(in > 0, "[", op, "] expected an input with non-zero spatial sizes, got shape ", shape_str(input.sizes()));
    const int64_t k = weight.size(2 + d);
    const int64_t size = (in - 1) * p.stride[d] - 2 * p.padding[d] + p.dilation[d] * (k - 1) + extra[d] + 1;
    TG_CHECK(size > 0, "[", op, "] input of shape ", shape_str(input.sizes()), " with padding ",
             list_str(p.padding, first, spatial), " gives a non-positive output size ", size);
    out_sizes.push_back(size);
  }
  Tensor out = conv2d_backward_input(input, weight, out_sizes, p);
  if (b.defined()) {
    Shape bshape(out_sizes.size(), 1);
    bshape[1] = out_channels;
    out = add(out, b.view(bshape));
  }
  if (spatial == 1) out = squeeze(out, 2);
  if (unbatched) out = squeeze(out, 0);
  return out;
}

}  // namespace

Tensor conv_transpose1d(const Tensor& input, const Tensor& weight, const Tensor& bias, Shape stride, Shape padding,
                        Shape output_padding, int64_t groups, Shape dilation) {
  return conv_transpose_nd("conv_transpose1d", 1, input, weight, bias, stride, padding, output_padding, groups,
                           dilation);
}

Tensor conv_transpose2d(const Tensor& input, const Tensor& weight, const Tensor& bias, Shape stride, Shape padding,
                        Shape output_padding, int64_t groups, Shape dilation) {
  return conv_transpose_nd("conv_transpose2d", 2, input, weight, bias, stride, padding, output_padding, groups,
                           dilation);
}

Tensor conv_transpose3d(const Tensor& input, const Tensor& weight, const Tensor& bias, Shape stride, Shape padding,
                        Shape output_padding, int64_t groups, Shape dilation) {
  return conv_transpose_nd("conv_transpose3d", 3, input, weight, bias, stride, padding, output_padding, groups,
                           dilation);
}

}  // namespace tg
