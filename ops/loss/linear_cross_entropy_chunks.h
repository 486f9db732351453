// What linear_cross_entropy's ops share: the argument checks, the chunk size, one chunk's logits
// and the matrix products of one chunk's logit gradient.
#pragma once

#include <cstdint>
#include <string>

#include "ops/core/op.h"
#include "ops/loss/loss.h"
#include "tensor/tensor.h"

namespace tg::lce {

// The dtype of the softmax arithmetic, the loss and the log-sum-exp: float32 for 16-bit products.
DType accumulation_dtype(DType t);
// Checks input [N, D] (with `any_rank`, [..., D] of N rows), weight [V, D], bias [V] (or null) and
// target [N] for `op`; returns the device.
Device check_args(const char* op, const Tensor& x, const Tensor& w, const Tensor* b, const Tensor& target,
                  bool any_rank = false);
// Rows per chunk: `requested`, or as many as keep a chunk's logits under 256 MiB when it is 0.
int64_t chunk_rows_for(int64_t requested, int64_t rows, int64_t classes, DType dtype);
// logits (contiguous [c, V]) = input[start : start + c] @ weight^T + bias (b may be null).
void chunk_logits(const Tensor& logits, const Tensor& x, const Tensor& w, const Tensor* b, int64_t start, int64_t c);
// The number of rows whose target is not ignore_index, as a 0-dim tensor of `dtype` on the device.
Tensor counted_rows(const Tensor& target, int64_t ignore_index, DType dtype);
// The products of dl [c, V], the logits' gradient of rows [start, start + c): each undefined
// output is skipped. dx's rows [start, start + c) = dl @ w; dw = dl^T @ x's rows for the first chunk
// (start 0), += for the others; db += dl's column sums. A float32 dx or dw of 16-bit operands is
// written, and summed over chunks, in float32 inside the product.
void add_chunk_products(const Tensor& dl, const Tensor& x, const Tensor& w, int64_t start, const Tensor& dx,
                        const Tensor& dw, const Tensor& db);

// The attributes every linear_cross_entropy op carries, and their printing.
class LinearCrossEntropyBase : public Op {
 public:
  LinearCrossEntropyBase(bool has_bias, Reduction r, int64_t ignore_index, int64_t chunk_rows)
      : has_bias_(has_bias), reduction_(r), ignore_index_(ignore_index), chunk_rows_(chunk_rows) {}
  std::string attrs() const override;

 protected:
  bool has_bias_;
  Reduction reduction_;
  int64_t ignore_index_;
  int64_t chunk_rows_;
};

}  // namespace tg::lce
