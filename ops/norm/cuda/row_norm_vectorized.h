// layer_norm's register-resident CUDA kernels: the fast path of row_norm_forward/backward
// (row_norm.cu) for rows that fit in one warp's registers.
#pragma once

#include "ops/norm/row_norm.h"

namespace tg::cuda {

// True when the vectorized kernels take these operands: a layer_norm geometry (one group, inner
// 1), 16-bit or float32 elements, rows of at most 1024 elements and a multiple of 4, and every
// operand aligned to a 4-element vector.
bool row_norm_vectorizable(const RowNormGeometry& g, const Tensor& x, std::initializer_list<const Tensor*> operands);

// row_norm_forward for vectorizable operands: each warp loads a row once and keeps it in registers.
void row_norm_forward_vectorized(const Tensor& x, const Tensor& w, const Tensor& b, const RowNormGeometry& g,
                                 const Tensor& y, const Tensor& mean, const Tensor& rstd);

// row_norm_backward for vectorizable operands with a defined gx: gy and x are read once for the
// input gradient and the parameters' gradients together (added per block in a fixed order, then
// across blocks by a finish pass, so every run gives the same sums).
void row_norm_backward_vectorized(const Tensor& gy, const Tensor& x, const Tensor& w, const Tensor& mean,
                                  const Tensor& rstd, const RowNormGeometry& g, const Tensor& gx, const Tensor& gw,
                                  const Tensor& gb);

}  // namespace tg::cuda
