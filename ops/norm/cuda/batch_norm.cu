// Training-mode batch normalization on CUDA over contiguous [N, C, S] tensors, three launches per
// direction: per-channel partial sums over chunks of the batch (so that a few channels still fill
// the GPU), a per-channel finish (statistics, the running-statistics blend, the coefficients of
// the elementwise pass), and one elementwise pass. Sums are shifted by a value of the channel and
// accumulated in double, so the variance does not cancel. Measured against cuDNN's spatial batch
// norm for NCHW float32 (several times slower on ResNet-sized activations), hence no cuDNN here.
#include <cub/block/block_reduce.cuh>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "ops/core/cuda/aligned_vector.cuh"
#include "ops/factory/factory.h"
#include "ops/norm/batch_norm.h"
#include "tensor/cuda/cuda_check.h"
#include "tensor/cuda/device_guard.h"
#include "tensor/half.h"

namespace tg::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kTargetBlocks = 512;  // blocks of the partial-sum pass (a few per SM)

// How the batch is cut into chunks: `per_chunk` planes (n) per block, `chunks` blocks per channel.
struct Chunks {
  int64_t per_chunk = 1, chunks = 1;
};

Chunks chunks_for(const BatchNormKernelArgs& a) {
  const int64_t want = std::clamp<int64_t>((kTargetBlocks + a.C - 1) / a.C, 1, a.N);
  Chunks c;
  c.per_chunk = (a.N + want - 1) / want;
  c.chunks = (a.N + c.per_chunk - 1) / c.per_chunk;
  return c;
}

struct Pair {
  double a, b;
};

struct PairSum {
  __device__ Pair operator()(const Pair& x, const Pair& y) const { return {x.a + y.a, x.b + y.b}; }
};

// Block (channel c, chunk k) sums over its planes: forward (second == nullptr) Σ(x - p), Σ(x - p)²
// with p the channel's first value; backward Σgy, Σgy·(x - mean[c]) with `first` = gy, `second` = x.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    partial_sums_kernel(const T* first, const T* second, const T* mean, int64_t N, int64_t C, int64_t S,
                        int64_t per_chunk, double* partial) {
  using BlockReduce = cub::BlockReduce<Pair, kThreads>;
  __shared__ typename BlockReduce::TempStorage temp;
  const int64_t c = blockIdx.x, k = blockIdx.y;
  const int64_t n0 = k * per_chunk, n1 = min(N, n0 + per_chunk);
  const double shift = second ? static_cast<double>(mean[c]) : static_cast<double>(first[c * S]);
  Pair acc{0.0, 0.0};
  for (int64_t n = n0; n < n1; ++n) {
    const int64_t base = (n * C + c) * S;
#pragma unroll 4
    for (int64_t s = threadIdx.x; s < S; s += kThreads) {
      if (second) {
        const double g = static_cast<double>(first[base + s]);
        acc.a += g;
        acc.b += g * (static_cast<double>(second[base + s]) - shift);
      } else {
        const double d = static_cast<double>(first[base + s]) - shift;
        acc.a += d;
        acc.b += d * d;
      }
    }
  }
  const Pair total = BlockReduce(temp).Reduce(acc, PairSum());
  if (threadIdx.x == 0) {
    partial[(c * gridDim.y + k) * 2] = total.a;
    partial[(c * gridDim.y + k) * 2 + 1] = total.b;
  }
}

// Per channel: the sums of the chunks.
__device__ Pair channel_sums(const double* partial, int64_t c, int64_t chunks) {
  Pair s{0.0, 0.0};
  for (int64_t k = 0; k < chunks; ++k) {
    s.a += partial[(c * chunks + k) * 2];
    s.b += partial[(c * chunks + k) * 2 + 1];
  }
  return s;
}

// Forward finish: statistics, running blend, and coef[c] = {mean, weight * invstd, bias}.
template <typename T>
__global__ void forward_finish_kernel(const T* x, const T* w, const T* b, const T* rm, const T* rv,
                                      const double* partial, int64_t C, int64_t S, int64_t chunks, double count,
                                      double momentum, double eps, T* save_mean, T* save_invstd, T* new_mean,
                                      T* new_var, double* coef) {
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= C) return;
  const Pair s = channel_sums(partial, c, chunks);
  const double shifted_mean = s.a / count;
  const double var = fmax(s.b / count - shifted_mean * shifted_mean, 0.0);
  const double mu = static_cast<double>(x[c * S]) + shifted_mean;
  const double invstd = 1.0 / sqrt(var + eps);
  save_mean[c] = static_cast<T>(mu);
  save_invstd[c] = static_cast<T>(invstd);
  if (new_mean) {
    new_mean[c] = static_cast<T>((1.0 - momentum) * static_cast<double>(rm[c]) + momentum * mu);
    new_var[c] = static_cast<T>((1.0 - momentum) * static_cast<double>(rv[c]) + momentum * var * count / (count - 1));
  }
  coef[c * 3] = mu;
  coef[c * 3 + 1] = static_cast<double>(w[c]) * invstd;
  coef[c * 3 + 2] = static_cast<double>(b[c]);
}

// Backward finish: grad_weight, grad_bias, and coef[c] = {mean, k, Σgy/n, invstd²·Σgy(x-mean)/n} with
// k = weight · invstd, so that gx = k·((gy - coef2) - (x - mean)·coef3). The differences come before
// k: a nearly constant channel has a huge invstd, and k·gy - k·mean(gy) would cancel digits away.
template <typename T>
__global__ void backward_finish_kernel(const T* w, const T* save_mean, const T* save_invstd, const double* partial,
                                       int64_t C, int64_t chunks, double count, T* gw, T* gb, double* coef) {
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= C) return;
  const Pair s = channel_sums(partial, c, chunks);
  const double invstd = static_cast<double>(save_invstd[c]);
  const double k = static_cast<double>(w[c]) * invstd;
  gb[c] = static_cast<T>(s.a);
  gw[c] = static_cast<T>(s.b * invstd);
  coef[c * 4] = static_cast<double>(save_mean[c]);
  coef[c * 4 + 1] = k;
  coef[c * 4 + 2] = s.a / count;
  coef[c * 4 + 3] = invstd * invstd * s.b / count;
}

// VEC elements of T as one 16-byte access.
template <typename T, int VEC>
struct alignas(sizeof(T) * VEC) Pack {
  T v[VEC];
};

// y = (x - mean) * scale + bias, or gx = k * ((gy - c2) - (x - mean) * c3): one block per [n, c] plane
// (grid-strided), the channel's coefficients loaded once; planes are read VEC elements at a time
// (S is a multiple of VEC, and planes start 16-byte aligned).
template <typename T, int VEC, bool kBackward>
__global__ void __launch_bounds__(kThreads)
    apply_kernel(const T* x, const T* gy, const double* coef, int64_t planes, int64_t C, int64_t S, T* out) {
  using P = Pack<T, VEC>;
  using A = acc_type<T>;  // 16-bit elements computed in float, rounded once
  const int64_t packs = S / VEC;
  for (int64_t plane = blockIdx.x; plane < planes; plane += gridDim.x) {
    const int64_t c = plane % C;
    const P* xp = reinterpret_cast<const P*>(x + plane * S);
    const P* gp = reinterpret_cast<const P*>(gy + plane * S);
    P* op = reinterpret_cast<P*>(out + plane * S);
    if (kBackward) {
      const A mu = static_cast<A>(coef[c * 4]), k = static_cast<A>(coef[c * 4 + 1]);
      const A c2 = static_cast<A>(coef[c * 4 + 2]), c3 = static_cast<A>(coef[c * 4 + 3]);
      for (int64_t i = threadIdx.x; i < packs; i += kThreads) {
        const P xv = xp[i], gv = gp[i];
        P r;
#pragma unroll
        for (int j = 0; j < VEC; ++j)
          r.v[j] = static_cast<T>(k * ((static_cast<A>(gv.v[j]) - c2) - (static_cast<A>(xv.v[j]) - mu) * c3));
        op[i] = r;
      }
    } else {
      const A mu = static_cast<A>(coef[c * 3]), scale = static_cast<A>(coef[c * 3 + 1]);
      const A bias = static_cast<A>(coef[c * 3 + 2]);
      for (int64_t i = threadIdx.x; i < packs; i += kThreads) {
        const P xv = xp[i];
        P r;
#pragma unroll
        for (int j = 0; j < VEC; ++j) r.v[j] = static_cast<T>((static_cast<A>(xv.v[j]) - mu) * scale + bias);
        op[i] = r;
      }
    }
  }
}

// The same for small planes (S below a warp): one thread per element.
template <typename T, bool kBackward>
__global__ void apply_flat_kernel(const T* x, const T* gy, const double* coef, int64_t total, int64_t C, int64_t S,
                                  T* out) {
  using A = acc_type<T>;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t c = (i / S) % C;
    const A xi = static_cast<A>(x[i]);
    if (kBackward) {
      const A mu = static_cast<A>(coef[c * 4]), k = static_cast<A>(coef[c * 4 + 1]);
      const A c2 = static_cast<A>(coef[c * 4 + 2]), c3 = static_cast<A>(coef[c * 4 + 3]);
      out[i] = static_cast<T>(k * ((static_cast<A>(gy[i]) - c2) - (xi - mu) * c3));
    } else {
      out[i] = static_cast<T>((xi - static_cast<A>(coef[c * 3])) * static_cast<A>(coef[c * 3 + 1]) +
                              static_cast<A>(coef[c * 3 + 2]));
    }
  }
}

template <typename T, bool kBackward>
void launch_apply(const T* x, const T* gy, const double* coef, const BatchNormKernelArgs& a, T* out,
                  cudaStream_t stream) {
  const int64_t planes = a.N * a.C;
  constexpr int kVec = static_cast<int>(16 / sizeof(T));
  const unsigned plane_grid = static_cast<unsigned>(std::min<int64_t>(planes, 1 << 20));
  if (a.S >= 32 && a.S % kVec == 0 && aligned_16(x) && aligned_16(gy) && aligned_16(out)) {
    apply_kernel<T, kVec, kBackward><<<plane_grid, kThreads, 0, stream>>>(x, gy, coef, planes, a.C, a.S, out);
  } else if (a.S >= 32) {
    apply_kernel<T, 1, kBackward><<<plane_grid, kThreads, 0, stream>>>(x, gy, coef, planes, a.C, a.S, out);
  } else {
    const int64_t total = planes * a.S;
    const unsigned grid = static_cast<unsigned>(std::min<int64_t>((total + kThreads - 1) / kThreads, 1 << 20));
    apply_flat_kernel<T, kBackward><<<grid, kThreads, 0, stream>>>(x, gy, coef, total, a.C, a.S, out);
  }
  TG_CUDA_CHECK_LAUNCH();
}

// Scratch doubles from the caching allocator: the partial sums, then per-channel coefficients.
Tensor scratch(int64_t n, Device device) { return empty({n}, {.dtype = kFloat64, .device = device}); }

template <typename T>
T* ptr(const Tensor& t) {
  return t.defined() ? t.data_ptr<T>() : nullptr;
}

}  // namespace

void batch_norm_forward(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& running_mean,
                        const Tensor& running_var, const Tensor& y, const Tensor& save_mean, const Tensor& save_invstd,
                        const Tensor& new_mean, const Tensor& new_var, const BatchNormKernelArgs& a) {
  DeviceGuard guard(y.device().index);
  cudaStream_t stream = current_stream();
  const Chunks ch = chunks_for(a);
  const Tensor work = scratch(a.C * ch.chunks * 2 + a.C * 3, y.device());
  double* partial = work.data_ptr<double>();
  double* coef = partial + a.C * ch.chunks * 2;
  const double count = static_cast<double>(a.N * a.S);
  TG_DISPATCH_FLOATING(x.dtype(), "batch_norm", [&] {
    using T = scalar_t;
    partial_sums_kernel<T><<<dim3(static_cast<unsigned>(a.C), static_cast<unsigned>(ch.chunks)), kThreads, 0,
                             stream>>>(x.data_ptr<T>(), nullptr, nullptr, a.N, a.C, a.S, ch.per_chunk, partial);
    TG_CUDA_CHECK_LAUNCH();
    forward_finish_kernel<T><<<static_cast<unsigned>((a.C + 127) / 128), 128, 0, stream>>>(
        x.data_ptr<T>(), w.data_ptr<T>(), b.data_ptr<T>(), ptr<T>(running_mean), ptr<T>(running_var), partial, a.C,
        a.S, ch.chunks, count, a.momentum, a.eps, save_mean.data_ptr<T>(), save_invstd.data_ptr<T>(), ptr<T>(new_mean),
        ptr<T>(new_var), coef);
    TG_CUDA_CHECK_LAUNCH();
    launch_apply<T, false>(x.data_ptr<T>(), nullptr, coef, a, y.data_ptr<T>(), stream);
  });
}

void batch_norm_backward(const Tensor& gy, const Tensor& x, const Tensor& w, const Tensor& save_mean,
                         const Tensor& save_invstd, const Tensor& gx, const Tensor& gw, const Tensor& gb,
                         const BatchNormKernelArgs& a) {
  DeviceGuard guard(gx.device().index);
  cudaStream_t stream = current_stream();
  const Chunks ch = chunks_for(a);
  const Tensor work = scratch(a.C * ch.chunks * 2 + a.C * 4, gx.device());
  double* partial = work.data_ptr<double>();
  double* coef = partial + a.C * ch.chunks * 2;
  const double count = static_cast<double>(a.N * a.S);
  TG_DISPATCH_FLOATING(x.dtype(), "batch_norm_backward", [&] {
    using T = scalar_t;
    partial_sums_kernel<T><<<dim3(static_cast<unsigned>(a.C), static_cast<unsigned>(ch.chunks)), kThreads, 0,
                             stream>>>(gy.data_ptr<T>(), x.data_ptr<T>(), save_mean.data_ptr<T>(), a.N, a.C, a.S,
                                       ch.per_chunk, partial);
    TG_CUDA_CHECK_LAUNCH();
    backward_finish_kernel<T><<<static_cast<unsigned>((a.C + 127) / 128), 128, 0, stream>>>(
        w.data_ptr<T>(), save_mean.data_ptr<T>(), save_invstd.data_ptr<T>(), partial, a.C, ch.chunks, count,
        gw.data_ptr<T>(), gb.data_ptr<T>(), coef);
    TG_CUDA_CHECK_LAUNCH();
    launch_apply<T, true>(x.data_ptr<T>(), gy.data_ptr<T>(), coef, a, gx.data_ptr<T>(), stream);
  });
}

}  // namespace tg::cuda
