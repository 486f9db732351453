// Copies, dtype conversion, device transfers and in-place metadata changes.
#pragma once

#include "ops/core/op.h"
#include "tensor/tensor.h"

namespace tg {

// Writes src (broadcast, converted to dst's dtype, from any device) into dst.
Tensor& copy_(Tensor& dst, const Tensor& src);
// A contiguous copy with the same values, differentiable.
Tensor clone(const Tensor& x);
// x itself when already contiguous, else clone(x).
Tensor contiguous(const Tensor& x);
// Converts dtype and/or moves to a device; returns x itself when nothing changes.
Tensor to(const Tensor& x, Device device, DType dtype);
// Every tensor of xs cast to `dtype` on its own device, as one op (one kernel per source dtype on
// CUDA): contiguous results, differentiable. Compiled graphs batch parameter casts into it.
TensorList cast_all(const TensorList& xs, DType dtype);
// The op of cast_all over `count` tensors, for graph rewrites.
OpPtr multi_tensor_cast_op(DType dtype, size_t count);
Tensor& fill_(Tensor& x, Scalar value);
Tensor& zero_(Tensor& x);
// Makes x contiguous with the given sizes, growing its storage if needed.
Tensor& resize_(Tensor& x, const Shape& sizes);
// Makes x share source's storage, sizes, strides and offset.
Tensor& set_(Tensor& x, const Tensor& source);

}  // namespace tg
