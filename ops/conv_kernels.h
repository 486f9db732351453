// The convolution kernels behind ops/conv.cpp: im2col + GEMM on the CPU, cuDNN on CUDA. All tensors
// are contiguous 4-D (NCHW / OIHW); outputs are allocated by the dispatcher.
#pragma once

#include "ops/conv.h"

namespace tg {

// y = conv(x, w) + bias (bias may be undefined).
void cpu_conv2d_forward(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& y, const Conv2dParams& p);
// gx = the gradient of conv w.r.t. its input.
void cpu_conv2d_backward_input(const Tensor& gy, const Tensor& w, const Tensor& gx, const Conv2dParams& p);
// gw = the gradient of conv w.r.t. its weight.
void cpu_conv2d_backward_weight(const Tensor& gy, const Tensor& x, const Tensor& gw, const Conv2dParams& p);

namespace cuda {
// The same three through cuDNN on the current stream (algorithm cached per shape, workspace from the
// caching allocator, FMA math: no TF32).
void conv2d_forward(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& y, const Conv2dParams& p);
void conv2d_backward_input(const Tensor& gy, const Tensor& w, const Tensor& gx, const Conv2dParams& p);
void conv2d_backward_weight(const Tensor& gy, const Tensor& x, const Tensor& gw, const Conv2dParams& p);
}  // namespace cuda

}  // namespace tg
