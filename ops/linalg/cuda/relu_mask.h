// The ReLU mask in cuBLASLt's auxiliary layout, for the products whose epilogue could not write it.
#pragma once

#include <cstdint>

#include "tensor/tensor.h"

namespace tg::cuda {

// mask[r, w] bit b = (y[r, 32w + b] > 0) for the contiguous [rows, cols] y, words int32 words per
// row (bits past cols are 0): the bit order cuBLASLt's ReLU epilogue writes (element i of a row in
// bit i % 8 of byte i / 8), on the current stream.
void relu_mask(const Tensor& y, const Tensor& mask, int64_t rows, int64_t cols, int64_t words);

}  // namespace tg::cuda
