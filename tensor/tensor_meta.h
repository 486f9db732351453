// Metadata of a tensor without its data: what shape rules produce and fake tensors carry.
#pragma once

#include <cstdint>

#include "tensor/device.h"
#include "tensor/dtype.h"
#include "tensor/shape.h"

namespace tg {

class Tensor;

// Sizes, strides, dtype and device of a tensor; for views, strides and offset index the base's storage.
struct TensorMeta {
  Shape sizes;
  Shape strides;
  int64_t offset = 0;
  DType dtype = kFloat32;
  Device device = kCPU;
};

// A contiguous TensorMeta.
TensorMeta contiguous_meta(Shape sizes, DType dtype, Device device);
// The metadata of an existing tensor.
TensorMeta meta_of(const Tensor& t);

}  // namespace tg
