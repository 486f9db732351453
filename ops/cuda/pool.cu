// CUDA kernels for 2-D pooling: one thread per output element; the average backward scatters with atomics.
#include "ops/cuda/pool.h"

#include <cmath>
#include <limits>

#include "ops/cuda/atomic.cuh"
#include "tensor/cuda/cuda_check.h"

namespace tg::cuda {
namespace {

constexpr int kThreads = 256;

int64_t blocks(int64_t n) { return (n + kThreads - 1) / kThreads; }

template <typename T>
__global__ void pool_forward_kernel(PoolGeometry g, const T* x, T* out, int64_t* idx) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= g.out_numel()) return;
  const int64_t ow = i % g.OW, oh = (i / g.OW) % g.OH, c = (i / (g.OW * g.OH)) % g.C, n = i / (g.OW * g.OH * g.C);
  const T* plane = x + n * g.sN + c * g.sC;
  if (g.mode == PoolMode::Max) {
    T best = -std::numeric_limits<T>::infinity();
    int64_t best_i = -1;
    for (int64_t a = 0; a < g.kh; ++a) {
      const int64_t h = oh * g.sh - g.ph + a * g.dh;
      if (h < 0 || h >= g.H) continue;
      for (int64_t b = 0; b < g.kw; ++b) {
        const int64_t w = ow * g.sw - g.pw + b * g.dw;
        if (w < 0 || w >= g.W) continue;
        const T v = plane[h * g.sH + w * g.sW];
        if (best_i < 0 || v > best || isnan(v)) {
          best = v;
          best_i = h * g.W + w;
          if (isnan(v)) { a = g.kh; break; }
        }
      }
    }
    out[i] = best;
    idx[i] = best_i;
    return;
  }
  const AvgWindow win = avg_window(g, oh, ow);
  T s = 0;
  for (int64_t h = win.h0; h < win.h1; ++h)
    for (int64_t w = win.w0; w < win.w1; ++w) s += plane[h * g.sH + w * g.sW];
  out[i] = s / static_cast<T>(win.divisor);
}

template <typename T>
__global__ void avg_backward_kernel(PoolGeometry g, const T* grad, T* gi) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= g.out_numel()) return;
  const int64_t ow = i % g.OW, oh = (i / g.OW) % g.OH, c = (i / (g.OW * g.OH)) % g.C, n = i / (g.OW * g.OH * g.C);
  const AvgWindow win = avg_window(g, oh, ow);
  const T v = grad[n * g.sN + c * g.sC + oh * g.sH + ow * g.sW] / static_cast<T>(win.divisor);
  T* plane = gi + (n * g.C + c) * g.H * g.W;
  for (int64_t h = win.h0; h < win.h1; ++h)
    for (int64_t w = win.w0; w < win.w1; ++w) atomic_add(plane + h * g.W + w, v);
}

}  // namespace

void pool2d_forward(const PoolGeometry& g, const Tensor& input, Tensor& out, Tensor* indices) {
  if (g.out_numel() == 0) return;
  TG_DISPATCH_FLOATING(input.dtype(), "pool2d", [&] {
    pool_forward_kernel<scalar_t><<<blocks(g.out_numel()), kThreads, 0, current_stream()>>>(
        g, input.data_ptr<scalar_t>(), out.data_ptr<scalar_t>(), indices ? indices->data_ptr<int64_t>() : nullptr);
  });
  TG_CUDA_CHECK(cudaGetLastError());
}

void avg_pool2d_backward(const PoolGeometry& g, const Tensor& grad, Tensor& grad_input) {
  if (g.in_numel() == 0) return;
  TG_DISPATCH_FLOATING(grad.dtype(), "avg_pool2d_backward", [&] {
    TG_CUDA_CHECK(cudaMemsetAsync(grad_input.data_ptr<scalar_t>(), 0, g.in_numel() * sizeof(scalar_t), current_stream()));
    if (g.out_numel() == 0) return;
    avg_backward_kernel<scalar_t><<<blocks(g.out_numel()), kThreads, 0, current_stream()>>>(
        g, grad.data_ptr<scalar_t>(), grad_input.data_ptr<scalar_t>());
  });
  TG_CUDA_CHECK(cudaGetLastError());
}

}  // namespace tg::cuda
