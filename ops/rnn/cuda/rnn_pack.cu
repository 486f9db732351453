// The segment-copy kernel behind cuDNN weight packing: blockIdx.y picks a segment of the batch,
// blockIdx.x strides over its elements.
#include "ops/rnn/cuda/rnn_pack.h"

#include <algorithm>

#include "tensor/check.h"
#include "tensor/cuda/cuda_check.h"

namespace tg::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kBatch = 32;  // segments per launch: the batch travels as a kernel argument

struct SegmentBatch {
  CopySegment s[kBatch];
};

template <typename T>
__global__ void copy_segments_kernel(SegmentBatch batch) {
  const CopySegment& seg = batch.s[blockIdx.y];
  const T* src = static_cast<const T*>(seg.src);
  T* dst = static_cast<T*>(seg.dst);
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < seg.count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    dst[i] = src[i];
}

}  // namespace

void copy_segments(const std::vector<CopySegment>& segments, DType dtype) {
  const int64_t esize = dtype_size(dtype);
  TG_CHECK(esize == 2 || esize == 4 || esize == 8, "[rnn] weight packing takes 2-, 4- or 8-byte elements, got ",
           dtype_name(dtype));
  for (size_t start = 0; start < segments.size(); start += kBatch) {
    SegmentBatch batch{};
    const size_t n = std::min<size_t>(kBatch, segments.size() - start);
    int64_t longest = 0;
    for (size_t i = 0; i < n; ++i) {
      batch.s[i] = segments[start + i];
      longest = std::max(longest, batch.s[i].count);
    }
    if (longest == 0) continue;
    const int64_t blocks = std::min<int64_t>((longest + kThreads - 1) / kThreads, 1024);
    const dim3 grid(static_cast<unsigned>(blocks), static_cast<unsigned>(n));
    // A copy moves bits: elements are copied as unsigned integers of their width.
    if (esize == 2) {
      copy_segments_kernel<uint16_t><<<grid, kThreads, 0, current_stream()>>>(batch);
    } else if (esize == 4) {
      copy_segments_kernel<uint32_t><<<grid, kThreads, 0, current_stream()>>>(batch);
    } else {
      copy_segments_kernel<uint64_t><<<grid, kThreads, 0, current_stream()>>>(batch);
    }
    TG_CUDA_CHECK(cudaGetLastError());
  }
}

}  // namespace tg::cuda
