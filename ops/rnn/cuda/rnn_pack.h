// Copies between separate weight tensors and cuDNN's single weight space, in one launch per batch of
// segments (a layer's matrices and biases) rather than one copy per tensor.
#pragma once

#include <cstdint>
#include <vector>

#include "tensor/dtype.h"

namespace tg::cuda {

// `count` elements from `src` to `dst` (device pointers, no overlap).
struct CopySegment {
  const void* src = nullptr;
  void* dst = nullptr;
  int64_t count = 0;
};

// Runs every segment on the current stream (elements of `dtype`, of any 2-, 4- or 8-byte dtype).
void copy_segments(const std::vector<CopySegment>& segments, DType dtype);

}  // namespace tg::cuda
