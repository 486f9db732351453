#include "ops/linalg/cuda/relu_mask.h"

#include "tensor/cuda/cuda_check.h"

namespace tg::cuda {
namespace {

constexpr int kThreads = 256;

// One thread per 32-bit word: its 32 elements of one row (a warp reads 1024 consecutive ones).
template <typename T>
__global__ void relu_mask_kernel(const T* __restrict__ y, uint32_t* __restrict__ mask, int64_t rows, int64_t cols,
                                 int64_t words) {
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= rows * words) return;
  const int64_t r = idx / words;
  const int64_t first = (idx - r * words) * 32;
  const T* row = y + r * cols;
  uint32_t word = 0;
  for (int b = 0; b < 32 && first + b < cols; ++b)
    if (row[first + b] > T(0)) word |= 1u << b;
  mask[idx] = word;
}

}  // namespace

void relu_mask(const Tensor& y, const Tensor& mask, int64_t rows, int64_t cols, int64_t words) {
  if (rows * words == 0) return;
  const Tensor yc = y.contiguous();
  auto* bits = static_cast<uint32_t*>(mask.raw_data());
  TG_DISPATCH_FLOATING(yc.dtype(), "relu_mask", [&] {
    relu_mask_kernel<scalar_t><<<blocks_for(rows * words, kThreads), kThreads, 0, current_stream()>>>(
        yc.data_ptr<scalar_t>(), bits, rows, cols, words);
  });
  TG_CUDA_CHECK_LAUNCH();
}

}  // namespace tg::cuda
