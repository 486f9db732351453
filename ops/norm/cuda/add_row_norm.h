// add_layer_norm's CUDA kernels: layer_norm's register-resident rows (row_norm_kernels.cuh) with the
// residual add, the output cast, and in the backward the gradients' sum and its cast folded in.
#pragma once

#include "ops/norm/row_norm.h"

namespace tg::cuda {

// s = x + u and y = layer_norm(s) in y's dtype, with the statistics; false (nothing launched) when
// the geometry, alignment or dtypes (x, u, y, parameters) have no kernel.
bool add_row_norm_forward(const Tensor& x, const Tensor& u, const Tensor& w, const Tensor& b,
                          const RowNormGeometry& g, const Tensor& s, const Tensor& y, const Tensor& mean,
                          const Tensor& rstd);

// gx = layer_norm's input gradient from gy (any floating dtype) plus `acc` when defined, written
// again in gx_low's dtype when gx_low is defined, and the parameters' gradients gw/gb when defined;
// false (nothing launched) when no kernel takes these operands.
bool add_row_norm_backward(const Tensor& gy, const Tensor& x, const Tensor& w, const Tensor& mean,
                           const Tensor& rstd, const RowNormGeometry& g, const Tensor& acc, const Tensor& gx,
                           const Tensor& gx_low, const Tensor& gw, const Tensor& gb);

}  // namespace tg::cuda
