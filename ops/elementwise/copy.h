// Copies, dtype conversion, device transfers and in-place metadata changes.
#pragma once

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
Tensor& fill_(Tensor& x, Scalar value);
Tensor& zero_(Tensor& x);
// Makes x contiguous with the given sizes, growing its storage if needed.
Tensor& resize_(Tensor& x, const Shape& sizes);
// Makes x share source's storage, sizes, strides and offset.
Tensor& set_(Tensor& x, const Tensor& source);

}  // namespace tg
