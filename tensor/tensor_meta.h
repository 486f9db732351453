// Metadata of a tensor without its data: what shape rules produce and fake tensors carry.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

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
// The metadata list of a one-output op, as infer() returns it (moved in: a braced list would copy
// both shapes, two allocations on every eager op call).
inline std::vector<TensorMeta> single_output(TensorMeta meta) {
  std::vector<TensorMeta> metas;
  metas.push_back(std::move(meta));
  return metas;
}

}  // namespace tg
