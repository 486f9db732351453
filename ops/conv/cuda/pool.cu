// CUDA kernels for pooling: one thread per output element over the window loops of
// ops/conv/pool_geometry.h (shared with the CPU); the average backward scatters with atomics.
#include "ops/conv/cuda/pool.h"

#include <cmath>
#include <limits>

#include "ops/core/cuda/atomic.cuh"
#include "tensor/cuda/cuda_check.h"

namespace tg::cuda {
namespace {

constexpr int kThreads = 256;

int64_t blocks(int64_t n) { return (n + kThreads - 1) / kThreads; }

template <typename T>
__global__ void pool_forward_kernel(PoolGeometry g, const T* x, T* out, int64_t* idx) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < g.out_numel()) pool_output(g, x, out, idx, i);
}

template <typename T>
__global__ void avg_backward_kernel(PoolGeometry g, const T* grad, T* gi) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= g.out_numel()) return;
  int64_t n, c, o[3];
  unflatten_output(g, i, n, c, o);
  const T v = grad[n * g.sN + c * g.sC + o[0] * g.sx[0] + o[1] * g.sx[1] + o[2] * g.sx[2]];
  avg_spread(g, v, o, gi + (n * g.C + c) * g.in_plane(), [](T* at, T add) { atomic_add(at, add); });
}

}  // namespace

void pool_forward(const PoolGeometry& g, const Tensor& input, Tensor& out, Tensor* indices) {
  if (g.out_numel() == 0) return;
  TG_DISPATCH_FLOATING(input.dtype(), "pool", [&] {
    pool_forward_kernel<scalar_t><<<blocks(g.out_numel()), kThreads, 0, current_stream()>>>(
        g, input.data_ptr<scalar_t>(), out.data_ptr<scalar_t>(), indices ? indices->data_ptr<int64_t>() : nullptr);
  });
  TG_CUDA_CHECK(cudaGetLastError());
}

void avg_pool_backward(const PoolGeometry& g, const Tensor& grad, Tensor& grad_input) {
  if (g.in_numel() == 0) return;
  TG_DISPATCH_FLOATING(grad.dtype(), "avg_pool_backward", [&] {
    TG_CUDA_CHECK(cudaMemsetAsync(grad_input.data_ptr<scalar_t>(), 0, g.in_numel() * sizeof(scalar_t), current_stream()));
    if (g.out_numel() == 0) return;
    avg_backward_kernel<scalar_t><<<blocks(g.out_numel()), kThreads, 0, current_stream()>>>(
        g, grad.data_ptr<scalar_t>(), grad_input.data_ptr<scalar_t>());
  });
  TG_CUDA_CHECK(cudaGetLastError());
}

}  // namespace tg::cuda
