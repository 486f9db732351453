// Joining and gathering: cat, stack, repeat, index_select.
#pragma once

#include "ops/core/op.h"
#include "tensor/tensor.h"

namespace tg {

// Concatenates along an existing dim (all other sizes must match).
Tensor cat(const TensorList& tensors, int64_t dim = 0);
// The op of cat(count tensors, dim), for graph rewrites that build cat nodes.
OpPtr cat_op(int64_t dim, size_t count);
// Stacks along a new dim.
Tensor stack(const TensorList& tensors, int64_t dim = 0);
// x tiled repeats[i] times along dim i (torch.Tensor.repeat); repeats may have more entries than x
// has dims, the extra leading ones adding dims. The gradient sums over the copies.
Tensor repeat(const Tensor& x, const Shape& repeats);
// Rows (or slices along `dim`) picked by an int64/int32 index vector.
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index);
// x with source's slices added at the positions `index` names along dim (repeats accumulate);
// the scatter that index_select's gradient needs.
Tensor index_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& source);

}  // namespace tg
