// Rows along one dim of a strided tensor: the shared geometry of topk and multinomial, so the CPU
// loop and the CUDA kernels read non-contiguous inputs (and write outputs) without a copy.
#pragma once

#include <cstdint>

#include "tensor/hd.h"
#include "tensor/tensor.h"

namespace tg {

// Row r (row-major over every dim but `dim`) starts at row_offset(r); its element j lies
// j * dim_stride further. Passed to kernels by value.
struct RowLayout {
  static constexpr int kMaxDims = 16;
  int ndim = 0;  // dims other than `dim`
  int64_t sizes[kMaxDims] = {};
  int64_t strides[kMaxDims] = {};
  int64_t dim_stride = 1;

  TG_HD int64_t row_offset(int64_t r) const {
    int64_t off = 0;
    for (int i = ndim - 1; i >= 0; --i) {
      off += (r % sizes[i]) * strides[i];
      r /= sizes[i];
    }
    return off;
  }
};

// The layout of `t` split into rows along `dim` (already wrapped; ignored for a 0-dim tensor,
// which is one row of one element).
inline RowLayout row_layout(const Tensor& t, int64_t dim, const char* op) {
  RowLayout l;
  TG_CHECK(t.dim() <= RowLayout::kMaxDims + 1, "[", op, "] supports tensors of up to ", RowLayout::kMaxDims + 1,
           " dims, got ", t.dim());
  for (int64_t i = 0; i < t.dim(); ++i) {
    if (i == dim) {
      l.dim_stride = t.strides()[static_cast<size_t>(i)];
      continue;
    }
    l.sizes[l.ndim] = t.sizes()[static_cast<size_t>(i)];
    l.strides[l.ndim] = t.strides()[static_cast<size_t>(i)];
    ++l.ndim;
  }
  return l;
}

}  // namespace tg
