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

#ifdef TG_WITH_DNNL
// The float32 CPU path through oneDNN (same contracts as the three above).
void onednn_conv2d_forward(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& y, const Conv2dParams& p);
void onednn_conv2d_backward_input(const Tensor& gy, const Tensor& w, const Tensor& gx, const Conv2dParams& p);
void onednn_conv2d_backward_weight(const Tensor& gy, const Tensor& x, const Tensor& gw, const Conv2dParams& p);
#endif
// Routes float32 CPU convolutions through oneDNN (when built with it) or im2col + GEMM.
void set_cpu_conv_onednn(bool on);
// True when float32 CPU convolutions go through oneDNN.
bool cpu_conv_onednn();
// True when this build has oneDNN.
bool cpu_conv_onednn_available();

namespace cuda {
// The same three through cuDNN on the current stream (algorithm cached per shape, workspace from the
// caching allocator, FMA math: no TF32).
void conv2d_forward(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& y, const Conv2dParams& p);
void conv2d_backward_input(const Tensor& gy, const Tensor& w, const Tensor& gx, const Conv2dParams& p);
void conv2d_backward_weight(const Tensor& gy, const Tensor& x, const Tensor& gw, const Conv2dParams& p);
}  // namespace cuda

}  // namespace tg
