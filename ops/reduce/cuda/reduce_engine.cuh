// The CUDA reduction engine behind sum, mean, amax/amin, argmax, var and the losses:
// out[o] = combine over r of load(kept(o) + reduced(r), o, r), then store(o, result).
//
// Strategy by geometry (no hand-written reduction trees: CUB does the tree work):
// - one output over contiguous elements read as they are: cub::DeviceReduce;
// - each output's elements closer in memory than neighbouring outputs (an "inner" reduction):
//   one block per output (or per chunk of an output, when outputs are too few to fill the GPU)
//   whose threads stride through the elements, finished by cub::BlockReduce;
// - neighbouring outputs adjacent in memory (an "outer" reduction), or very short reductions: one
//   thread per output walking its elements in order (coalesced across the warp), with the reduced
//   range split into chunks when there are too few outputs to fill the GPU.
// Chunked passes write partials that one more pass of the engine combines.
// Temporary storage comes from the tensor allocator, so graph capture can route it to a private pool.
// A file that reduces raw values (ValueLoad) also includes reduce_device_wide.cuh, which defines
// the device-wide path; the other files skip CUB's device-wide headers.
#pragma once

#include <cub/block/block_reduce.cuh>

#include <algorithm>
#include <cstdint>

#include "ops/factory/factory.h"
#include "ops/reduce/reduce_plan.h"
#include "tensor/cuda/cuda_check.h"

namespace tg::cuda::detail {

inline constexpr int kReduceThreads = 256;

// A device buffer of `count` values of T, allocated through the tensor allocator.
template <typename T>
struct DeviceBuffer {
  Tensor bytes;
  T* ptr = nullptr;
  DeviceBuffer(int64_t count, Device device) {
    const int64_t n = std::max<int64_t>(1, count * static_cast<int64_t>(sizeof(T)));
    bytes = empty({n}, {.dtype = kBool, .device = device});
    ptr = static_cast<T*>(bytes.raw_data());
  }
};

// Reads x[offset] as its accumulator type (float for 16-bit floats); a contiguous single-output
// reduction of a type that is its own accumulator hands its pointer straight to CUB. ValueLoad<Acc>
// also reads partial results back in a further pass: where T is its own accumulator, the passes
// over partials then share the first pass's kernels.
template <typename T>
struct ValueLoad {
  const T* ptr;
  __host__ __device__ acc_type<T> operator()(int64_t off, int64_t, int64_t) const { return ptr[off]; }
};

template <typename Load>
inline constexpr bool kIsValueLoad = false;
template <typename T>
inline constexpr bool kIsValueLoad<ValueLoad<T>> = !is_half_v<T>;

// One CUB device-wide reduction of `in` (n items) into store(0, result). Defined in
// reduce_device_wide.cuh, which every file that reduces with a ValueLoad includes.
template <typename Input, typename Acc, typename Combine, typename Store>
void device_reduce(Input in, int64_t n, Acc init, Combine combine, Store store, Device device, cudaStream_t stream);

// Output o (or its chunk's partial) from the chunk [c * chunk_len, ...) of its reduced elements,
// one block per (output, chunk), threads striding through the chunk and cub::BlockReduce at the end.
template <typename Acc, typename Load, typename Combine, typename Store>
__global__ void __launch_bounds__(kReduceThreads)
    block_per_output_kernel(ReducePlan p, Load load, Combine combine, Acc init, int64_t chunks, int64_t chunk_len,
                            Store store, Acc* partial) {
  using BlockReduce = cub::BlockReduce<Acc, kReduceThreads>;
  __shared__ typename BlockReduce::TempStorage temp;
  const int64_t block = blockIdx.x;
  const int64_t o = block / chunks;
  const int64_t c = block - o * chunks;
  const int64_t base = offset_at(p.kept, o);
  const int64_t lo = c * chunk_len;
  const int64_t hi = lo + chunk_len < p.n_red ? lo + chunk_len : p.n_red;
  Acc acc = init;
  for (int64_t r = lo + threadIdx.x; r < hi; r += kReduceThreads)
    acc = combine(acc, load(base + offset_at(p.reduced, r), o, r));
  acc = BlockReduce(temp).Reduce(acc, combine);
  if (threadIdx.x == 0) {
    if (partial) partial[o * chunks + c] = acc;
    else store(o, acc);
  }
}

// Each thread walks one output's chunk of reduced elements in order; partials go to [chunk][output].
template <typename Acc, typename Load, typename Combine, typename Store>
__global__ void __launch_bounds__(kReduceThreads)
    thread_per_output_kernel(ReducePlan p, Load load, Combine combine, Acc init, int64_t chunk_len, Store store,
                             Acc* partial) {
  const int64_t c = blockIdx.y;
  const int64_t lo = c * chunk_len;
  const int64_t hi = lo + chunk_len < p.n_red ? lo + chunk_len : p.n_red;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t o = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; o < p.n_out; o += step) {
    const int64_t base = offset_at(p.kept, o);
    Acc acc = init;
    // Unrolled so that the loads of several steps are in flight at once; the combine stays in order.
#pragma unroll 8
    for (int64_t r = lo; r < hi; ++r) acc = combine(acc, load(base + offset_at(p.reduced, r), o, r));
    if (partial) partial[c * p.n_out + o] = acc;
    else store(o, acc);
  }
}

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// A plan over a contiguous buffer of partials laid out [n_out][chunks] (inner) or [chunks][n_out].
inline ReducePlan partial_plan(int64_t n_out, int64_t chunks, bool chunks_inner) {
  ReducePlan q;
  q.n_out = n_out;
  q.n_red = chunks;
  q.kept.ndim = 1;
  q.kept.sizes[0] = n_out;
  q.kept.strides[0] = chunks_inner ? chunks : 1;
  q.reduced.ndim = 1;
  q.reduced.sizes[0] = chunks;
  q.reduced.strides[0] = chunks_inner ? 1 : n_out;
  return q;
}

// Runs the reduction described by `p` on the current stream. load(offset, o, r) -> Acc reads one
// element; combine is associative; store(o, acc) writes one output. `device` hosts temporaries.
// kOverPartials marks the passes over chunk partials (never a single output, so CUB's device-wide
// reduction is not instantiated for them).
template <bool kOverPartials = false, typename Acc, typename Load, typename Combine, typename Store>
void reduce(const ReducePlan& p, Acc init, Load load, Combine combine, Store store, Device device) {
  if (p.n_out == 0) return;
  cudaStream_t stream = current_stream();
  int64_t min_red_stride = INT64_MAX;
  for (int d = 0; d < p.reduced.ndim; ++d) min_red_stride = std::min(min_red_stride, p.reduced.strides[d]);
  const bool outputs_innermost = p.kept.ndim > 0 && p.kept.strides[p.kept.ndim - 1] < min_red_stride;

  if constexpr (!kOverPartials && kIsValueLoad<Load>) {
    // A single output over contiguous elements of a type that is its own accumulator: CUB's
    // device-wide reduction, which loads the raw pointer in vectors. Every other single output
    // (strided, 16-bit, or read through a custom load) takes the block path below: one instance of
    // CUB's reduction per load type cost more to compile than it saved at run time.
    if (p.n_out == 1 && p.n_red > 0 && p.reduced.ndim == 1 && p.reduced.strides[0] == 1) {
      return device_reduce(load.ptr, p.n_red, init, combine, store, device, stream);
    }
  }

  if (outputs_innermost || p.n_red < 32) {
    // Enough threads to fill the GPU: split the reduced range when outputs alone are too few.
    constexpr int64_t kTargetThreads = int64_t{1} << 16;
    int64_t chunks = 1;
    if (p.n_out < kTargetThreads && p.n_red >= 256) {
      chunks = std::min({ceil_div(kTargetThreads, p.n_out), ceil_div(p.n_red, 64), int64_t{4096}});
    }
    const int64_t chunk_len = ceil_div(std::max<int64_t>(p.n_red, 1), chunks);
    chunks = ceil_div(std::max<int64_t>(p.n_red, 1), chunk_len);
    const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(ceil_div(p.n_out, kReduceThreads), 1 << 20));
    const dim3 grid(blocks, static_cast<unsigned>(chunks));
    if (chunks == 1) {
      thread_per_output_kernel<Acc><<<grid, kReduceThreads, 0, stream>>>(p, load, combine, init, chunk_len, store,
                                                                          static_cast<Acc*>(nullptr));
      TG_CUDA_CHECK_LAUNCH();
      return;
    }
    DeviceBuffer<Acc> partial(p.n_out * chunks, device);
    thread_per_output_kernel<Acc><<<grid, kReduceThreads, 0, stream>>>(p, load, combine, init, chunk_len, store,
                                                                        partial.ptr);
    TG_CUDA_CHECK_LAUNCH();
    reduce<true>(partial_plan(p.n_out, chunks, false), init, ValueLoad<Acc>{partial.ptr}, combine, store, device);
    return;
  }

  // Inner reductions: a block per output; when outputs are few, several blocks per output and one
  // more pass over their partials.
  const int64_t chunks = std::max<int64_t>(1, std::min(ceil_div(1024, p.n_out), ceil_div(p.n_red, 4096)));
  const int64_t chunk_len = ceil_div(p.n_red, chunks);
  const unsigned blocks = static_cast<unsigned>(p.n_out * chunks);
  if (chunks == 1) {
    block_per_output_kernel<Acc><<<blocks, kReduceThreads, 0, stream>>>(p, load, combine, init, 1, chunk_len, store,
                                                                         static_cast<Acc*>(nullptr));
    TG_CUDA_CHECK_LAUNCH();
    return;
  }
  DeviceBuffer<Acc> partial(p.n_out * chunks, device);
  block_per_output_kernel<Acc><<<blocks, kReduceThreads, 0, stream>>>(p, load, combine, init, chunks, chunk_len,
                                                                       store, partial.ptr);
  TG_CUDA_CHECK_LAUNCH();
  reduce<true>(partial_plan(p.n_out, chunks, true), init, ValueLoad<Acc>{partial.ptr}, combine, store, device);
}

}  // namespace tg::cuda::detail
