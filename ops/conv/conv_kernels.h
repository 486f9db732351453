// The convolution kernels behind ops/conv/conv.cpp: im2col + GEMM (or oneDNN) on the CPU, cuDNN on CUDA.
// All tensors are contiguous 4-D (NCHW / OIHW) or 5-D (NCDHW / OIDHW) as params.spatial says;
// outputs are allocated by the dispatcher.
#pragma once

#include "ops/conv/conv.h"

namespace tg {

// y = conv(x, w) + bias (bias may be undefined).
void cpu_conv_forward(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& y, const ConvParams& p);
// gx = the gradient of conv w.r.t. its input.
void cpu_conv_backward_input(const Tensor& gy, const Tensor& w, const Tensor& gx, const ConvParams& p);
// gw = the gradient of conv w.r.t. its weight.
void cpu_conv_backward_weight(const Tensor& gy, const Tensor& x, const Tensor& gw, const ConvParams& p);

#ifdef TG_WITH_DNNL
// The float32 CPU path through oneDNN (same contracts as the three above).
void onednn_conv_forward(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& y, const ConvParams& p);
void onednn_conv_backward_input(const Tensor& gy, const Tensor& w, const Tensor& gx, const ConvParams& p);
void onednn_conv_backward_weight(const Tensor& gy, const Tensor& x, const Tensor& gw, const ConvParams& p);
#endif
// Routes float32 CPU convolutions through oneDNN (when built with it) or im2col + GEMM.
void set_cpu_conv_onednn(bool on);
// True when float32 CPU convolutions go through oneDNN.
bool cpu_conv_onednn();
// True when this build has oneDNN.
bool cpu_conv_onednn_available();

namespace conv_detail {
// `v` (one value or `spatial` values) as the per-dim entries of a ConvParams list, checked for size;
// a 1-D list lands in the width of a 2-D convolution whose height entry is `height_value`.
std::array<int64_t, 3> per_dim(const char* op, const char* what, const Shape& v, int spatial, int64_t height_value);
}  // namespace conv_detail

namespace cuda {
// The same three through cuDNN on the current stream (algorithm cached per shape, workspace from the
// caching allocator, FMA math: no TF32).
void conv_forward(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& y, const ConvParams& p);
void conv_backward_input(const Tensor& gy, const Tensor& w, const Tensor& gx, const ConvParams& p);
void conv_backward_weight(const Tensor& gy, const Tensor& x, const Tensor& gw, const ConvParams& p);
// Forgets the algorithm chosen for each shape, so the next call searches again (or reads the choice
// from the on-disk cache): what a new process would do.
void clear_conv_algorithms();
}  // namespace cuda

}  // namespace tg
