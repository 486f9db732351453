// CUDA kernels of linear_cross_entropy's per-row steps. The forward reads each row of logits once
// (a running maximum rescales the running sum), so a 50k-class row costs one pass, not two; rows
// whose starts are 16-byte aligned are read (and, backward, written) in 16-byte packs.
#include "ops/loss/cuda/linear_cross_entropy.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "ops/core/cuda/aligned_vector.cuh"
#include "tensor/cuda/cuda_check.h"
#include "tensor/cuda/device_error.h"
#include "tensor/half.h"

namespace tg::cuda {
namespace {

// Threads per row of the row kernels: enough warps for two rows an SM to hide their loads and
// exponentials when the fused kernel keeps each row in shared memory.
constexpr int kRowThreads = 512;

// Elements per 16-byte pack of T, or 1 when rows of `classes` elements at `base` cannot be read in
// packs (a row start off the pack alignment).
template <typename T>
int pack_width(const void* base, int64_t classes) {
  constexpr int kVec = static_cast<int>(16 / sizeof(T));
  const bool aligned = aligned_16(base) && classes % kVec == 0;
  return aligned ? kVec : 1;
}

// Merges the partial log-sum-exp (m2, s2) (max, sum of exp(x - max)) into (m, s); an empty part
// has m = -inf. NaN propagates.
template <typename A>
__device__ __forceinline__ void merge_lse(A& m, A& s, A m2, A s2) {
  constexpr A kNegInf = -std::numeric_limits<A>::infinity();
  if (m2 == kNegInf) return;
  if (m == kNegInf) {
    m = m2;
    s = s2;
  } else if (m2 > m) {
    s = s * exp(m - m2) + s2;
    m = m2;
  } else {
    s += s2 * exp(m2 - m);
  }
}

// Merges a pack of VEC elements into the running pair: the pack's maximum and sum of
// exp(x - maximum) merge at once (an element equal to the maximum counts exactly 1, so a lone +inf
// gives +inf as the one-element merge does; a pack of -inf adds nothing).
template <typename A, int VEC, typename T>
__device__ __forceinline__ void merge_pack(A& m, A& s, const AlignedVector<T, VEC>& pack) {
  constexpr A kNegInf = -std::numeric_limits<A>::infinity();
  A x[VEC];
  A pm = kNegInf;
#pragma unroll
  for (int k = 0; k < VEC; ++k) {
    x[k] = static_cast<A>(pack.v[k]);
    if (x[k] > pm || x[k] != x[k]) pm = x[k];
  }
  if (pm == kNegInf) return;
  A ps = 0;
#pragma unroll
  for (int k = 0; k < VEC; ++k) ps += x[k] == pm ? A(1) : exp(x[k] - pm);
  merge_lse(m, s, pm, ps);
}

// The block's threads' pairs merged, lanes then warps in a fixed order: the row's (max, sum) on
// thread 0 (the other threads' results are partial).
template <typename A>
__device__ __forceinline__ void merge_block(A& m, A& s) {
  for (int o = 16; o > 0; o /= 2) {
    const A m2 = __shfl_xor_sync(0xffffffffu, m, o);
    const A s2 = __shfl_xor_sync(0xffffffffu, s, o);
    merge_lse(m, s, m2, s2);
  }
  __shared__ A ms[kRowThreads / 32], ss[kRowThreads / 32];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) {
    ms[warp] = m;
    ss[warp] = s;
  }
  __syncthreads();
  if (threadIdx.x == 0)
    for (int w = 1; w < kRowThreads / 32; ++w) merge_lse(m, s, ms[w], ss[w]);
}

// Thread 0's end of a row's forward: lse[r] = l and loss[r] = l - x_t (0 for an ignored row, NaN
// and a reported error for a target out of range). Returns the row's target.
template <typename A, typename Logit>
__device__ __forceinline__ int64_t finish_row(A l, int64_t t, int64_t classes, int64_t ignore_index, int64_t row,
                                              Logit logit_at, A* lse, A* loss, DeviceErrorRecord* error) {
  const int64_t r = blockIdx.x;
  lse[r] = l;
  if (t == ignore_index) {
    loss[r] = A(0);
  } else if (t < 0 || t >= classes) {
    report_device_error(error, DeviceErrorOp::LinearCrossEntropy, t, classes, 0, row);
    loss[r] = std::numeric_limits<A>::quiet_NaN();
  } else {
    loss[r] = l - static_cast<A>(logit_at(t));
  }
  return t;
}

// One block per row: lse[r] and loss[r] = lse[r] - logits[r, t] (see finish_row). With VEC > 1 the
// row is read in packs of VEC elements (merge_pack).
template <typename T, typename A, int VEC>
__global__ void __launch_bounds__(kRowThreads)
    lse_rows_kernel(const T* __restrict__ logits, int64_t classes, const int64_t* __restrict__ target,
                    int64_t target_stride, int64_t ignore_index, int64_t first_row, A* __restrict__ lse,
                    A* __restrict__ loss, DeviceErrorRecord* error) {
  constexpr A kNegInf = -std::numeric_limits<A>::infinity();
  const int64_t r = blockIdx.x;
  const T* row = logits + r * classes;
  A m = kNegInf, s = 0;
  if constexpr (VEC == 1) {
    for (int64_t c = threadIdx.x; c < classes; c += kRowThreads) merge_lse(m, s, static_cast<A>(row[c]), A(1));
  } else {
    const auto* packs = reinterpret_cast<const AlignedVector<T, VEC>*>(row);
    for (int64_t v = threadIdx.x; v < classes / VEC; v += kRowThreads) merge_pack<A, VEC>(m, s, packs[v]);
  }
  merge_block(m, s);
  if (threadIdx.x != 0) return;
  finish_row(m + log(s), target[r * target_stride], classes, ignore_index, first_row + r,
             [row](int64_t c) { return row[c]; }, lse, loss, error);
}

// The gradient of one logit: (exp(x - l) - (c == t)) * g where the row's target is valid, else
// `fill` (0 on an ignored row, NaN on a bad target).
template <typename T, typename A>
__device__ __forceinline__ T logit_grad(T x, int64_t c, int64_t t, A l, A g, bool valid, A fill) {
  return static_cast<T>(valid ? (exp(static_cast<A>(x) - l) - (c == t ? A(1) : A(0))) * g : fill);
}

// Both steps in one block per row, the row kept in shared memory: the forward's pass reads it from
// global memory (lse_rows_kernel's threads, packs and merge order, so lse and loss are the same
// bits), then the gradient (softmax_grad_kernel's arithmetic) is written over it from the shared
// copy. Loads go kLoadBatch packs a thread at a time, so that enough reads are in flight while two
// blocks' rows fill an SM's shared memory. A bad target is reported once, as the forward's.
constexpr int kLoadBatch = 4;

template <typename T, typename A, int VEC>
__global__ void __launch_bounds__(kRowThreads, 2)
    lse_grad_rows_kernel(T* __restrict__ logits, int64_t classes, const int64_t* __restrict__ target,
                         int64_t target_stride, int64_t ignore_index, int64_t first_row, A* __restrict__ lse,
                         A* __restrict__ loss, const A* __restrict__ grad, int64_t grad_stride,
                         DeviceErrorRecord* error) {
  using Pack = AlignedVector<T, VEC>;
  constexpr A kNegInf = -std::numeric_limits<A>::infinity();
  extern __shared__ float4 shared_row[];
  Pack* kept = reinterpret_cast<Pack*>(shared_row);
  const int64_t r = blockIdx.x, packs = classes / VEC;
  Pack* row = reinterpret_cast<Pack*>(logits + r * classes);
  A m = kNegInf, s = 0;
  for (int64_t v0 = threadIdx.x; v0 < packs; v0 += kLoadBatch * kRowThreads) {
    Pack p[kLoadBatch];
#pragma unroll
    for (int b = 0; b < kLoadBatch; ++b)
      if (v0 + b * kRowThreads < packs) p[b] = row[v0 + b * kRowThreads];
#pragma unroll
    for (int b = 0; b < kLoadBatch; ++b) {
      const int64_t v = v0 + b * kRowThreads;
      if (v >= packs) break;
      kept[v] = p[b];
      merge_pack<A, VEC>(m, s, p[b]);
    }
  }
  merge_block(m, s);
  __shared__ A row_lse;
  __shared__ int64_t row_target;
  if (threadIdx.x == 0) {
    const T* elements = reinterpret_cast<const T*>(kept);
    row_lse = m + log(s);
    row_target = finish_row(row_lse, target[r * target_stride], classes, ignore_index, first_row + r,
                            [elements](int64_t c) { return elements[c]; }, lse, loss, error);
  }
  __syncthreads();
  const int64_t t = row_target;
  const bool valid = t != ignore_index && t >= 0 && t < classes;
  const A l = row_lse, g = valid ? grad[r * grad_stride] : A(0);
  const A fill = valid || t == ignore_index ? A(0) : std::numeric_limits<A>::quiet_NaN();
  for (int64_t v = threadIdx.x; v < packs; v += kRowThreads) {
    Pack pack = kept[v];
#pragma unroll
    for (int k = 0; k < VEC; ++k) pack.v[k] = logit_grad(pack.v[k], v * VEC + k, t, l, g, valid, fill);
    row[v] = pack;
  }
}

// logits[r, c] = (exp(logits[r, c] - lse[r]) - (c == t)) * grad[r], 0 on ignored rows. Rows along
// the grid's y, columns along x (no 64-bit division per element).
// With VEC > 1 each thread rewrites whole packs of VEC elements.
template <typename T, typename A, int VEC>
__global__ void softmax_grad_kernel(T* __restrict__ logits, int64_t rows, int64_t classes, const A* __restrict__ lse,
                                    const int64_t* __restrict__ target, int64_t target_stride, int64_t ignore_index,
                                    const A* __restrict__ grad, int64_t grad_stride, int64_t first_row,
                                    DeviceErrorRecord* error) {
  const int64_t v0 = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    auto* packs = reinterpret_cast<AlignedVector<T, VEC>*>(logits + r * classes);
    const int64_t t = target[r * target_stride];
    A l = 0, g = 0, fill = 0;
    const bool valid = t != ignore_index && t >= 0 && t < classes;
    if (valid) {
      l = lse[r];
      g = grad[r * grad_stride];
    } else if (t != ignore_index) {
      if (v0 == 0) report_device_error(error, DeviceErrorOp::LinearCrossEntropyBackward, t, classes, 0, first_row + r);
      fill = std::numeric_limits<A>::quiet_NaN();
    }
    for (int64_t v = v0; v < classes / VEC; v += step) {
      AlignedVector<T, VEC> pack = packs[v];
#pragma unroll
      for (int k = 0; k < VEC; ++k) pack.v[k] = logit_grad(pack.v[k], v * VEC + k, t, l, g, valid, fill);
      packs[v] = pack;
    }
  }
}

// out[i] = O(unit[i] * *grad), four elements a thread a turn where the sizes allow.
template <typename U, typename O>
__global__ void scale_kernel(const U* __restrict__ unit, const U* __restrict__ grad, O* __restrict__ out, int64_t n) {
  const U g = *grad;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t quads = n / 4;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < quads; i += stride) {
#pragma unroll
    for (int k = 0; k < 4; ++k) out[4 * i + k] = static_cast<O>(unit[4 * i + k] * g);
  }
  for (int64_t i = 4 * quads + static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    out[i] = static_cast<O>(unit[i] * g);
}

}  // namespace

bool scale_gradient(const Tensor& unit, const Tensor& grad, const Tensor& out) {
  const int64_t n = unit.numel();
  if (n == 0) return true;
  constexpr int kThreads = 256;
  const auto blocks = static_cast<unsigned>(std::clamp<int64_t>((n / 4 + kThreads - 1) / kThreads, 1, 4096));
  auto launch = [&]<typename U, typename O>() {
    scale_kernel<U, O><<<blocks, kThreads, 0, current_stream()>>>(unit.data_ptr<U>(), grad.data_ptr<U>(),
                                                                   out.data_ptr<O>(), n);
    TG_CUDA_CHECK_LAUNCH();
    return true;
  };
  if (unit.dtype() == kFloat64 && out.dtype() == kFloat64) return launch.template operator()<double, double>();
  if (unit.dtype() != kFloat32) return false;
  switch (out.dtype()) {
    case DType::Float32: return launch.template operator()<float, float>();
    case DType::BFloat16: return launch.template operator()<float, BFloat16>();
    case DType::Float16: return launch.template operator()<float, Half>();
    default: return false;
  }
}

void linear_cross_entropy_rows_forward(const Tensor& logits, const Tensor& target, int64_t ignore_index,
                                       int64_t first_row, const Tensor& lse, const Tensor& loss) {
  const int64_t rows = logits.size(0), classes = logits.size(1);
  if (rows == 0 || classes == 0) return;
  DeviceErrorRecord* error = device_error_record(logits.device().index);
  TG_DISPATCH_FLOATING(logits.dtype(), "linear_cross_entropy", [&] {
    using A = acc_type<scalar_t>;
    auto launch = [&]<int VEC>() {
      lse_rows_kernel<scalar_t, A, VEC><<<static_cast<unsigned>(rows), kRowThreads, 0, current_stream()>>>(
          logits.data_ptr<scalar_t>(), classes, target.data_ptr<int64_t>(), target.stride(0), ignore_index, first_row,
          lse.data_ptr<A>(), loss.data_ptr<A>(), error);
    };
    constexpr int kVec = static_cast<int>(16 / sizeof(scalar_t));
    if (pack_width<scalar_t>(logits.raw_data(), classes) == kVec) launch.template operator()<kVec>();
    else launch.template operator()<1>();
  });
  TG_CUDA_CHECK_LAUNCH();
}

void linear_cross_entropy_rows_backward(const Tensor& logits, const Tensor& lse, const Tensor& target,
                                        int64_t ignore_index, int64_t first_row, const Tensor& row_grad) {
  const int64_t rows = logits.size(0), classes = logits.size(1);
  if (rows == 0 || classes == 0) return;
  DeviceErrorRecord* error = device_error_record(logits.device().index);
  const int64_t grad_stride = row_grad.numel() == 1 ? 0 : 1;
  constexpr int kThreads = 256;
  TG_DISPATCH_FLOATING(logits.dtype(), "linear_cross_entropy_backward", [&] {
    using A = acc_type<scalar_t>;
    auto launch = [&]<int VEC>() {
      const int64_t packs = classes / VEC;
      const dim3 blocks(static_cast<unsigned>(std::min<int64_t>((packs + kThreads - 1) / kThreads, 1024)),
                        static_cast<unsigned>(std::min<int64_t>(rows, 65535)));
      softmax_grad_kernel<scalar_t, A, VEC><<<blocks, kThreads, 0, current_stream()>>>(
          logits.data_ptr<scalar_t>(), rows, classes, lse.data_ptr<A>(), target.data_ptr<int64_t>(),
          target.stride(0), ignore_index, row_grad.data_ptr<A>(), grad_stride, first_row, error);
    };
    constexpr int kVec = static_cast<int>(16 / sizeof(scalar_t));
    if (pack_width<scalar_t>(logits.raw_data(), classes) == kVec) launch.template operator()<kVec>();
    else launch.template operator()<1>();
  });
  TG_CUDA_CHECK_LAUNCH();
}

bool linear_cross_entropy_rows_fused(const Tensor& logits, const Tensor& target, int64_t ignore_index,
                                     int64_t first_row, const Tensor& lse, const Tensor& loss, const Tensor& row_grad) {
  const int64_t rows = logits.size(0), classes = logits.size(1);
  if (rows == 0 || classes == 0) return true;
  const size_t row_bytes = static_cast<size_t>(classes * dtype_size(logits.dtype()));
  int device = logits.device().index, per_sm = 0, per_block = 0;
  TG_CUDA_CHECK(cudaDeviceGetAttribute(&per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, device));
  TG_CUDA_CHECK(cudaDeviceGetAttribute(&per_block, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  // Two rows per SM at least (one would leave the SM idle while its block waits on its loads).
  constexpr size_t kReservedPerBlock = 2048;  // the runtime's share and the kernel's static arrays
  if (row_bytes > static_cast<size_t>(per_block) || 2 * (row_bytes + kReservedPerBlock) > static_cast<size_t>(per_sm))
    return false;
  bool launched = false;
  DeviceErrorRecord* error = device_error_record(device);
  const int64_t grad_stride = row_grad.numel() == 1 ? 0 : 1;
  auto launch = [&]<typename T>() {
    constexpr int kVec = static_cast<int>(16 / sizeof(T));
    if (pack_width<T>(logits.raw_data(), classes) != kVec) return;
    using A = acc_type<T>;
    auto* kernel = lse_grad_rows_kernel<T, A, kVec>;
    TG_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(row_bytes)));
    kernel<<<static_cast<unsigned>(rows), kRowThreads, row_bytes, current_stream()>>>(
        logits.data_ptr<T>(), classes, target.data_ptr<int64_t>(), target.stride(0), ignore_index, first_row,
        lse.data_ptr<A>(), loss.data_ptr<A>(), row_grad.data_ptr<A>(), grad_stride, error);
    TG_CUDA_CHECK_LAUNCH();
    launched = true;
  };
  switch (logits.dtype()) {
    case DType::BFloat16: launch.template operator()<BFloat16>(); break;
    case DType::Float16: launch.template operator()<Half>(); break;
    case DType::Float32: launch.template operator()<float>(); break;
    default: break;
  }
  return launched;
}

}  // namespace tg::cuda
