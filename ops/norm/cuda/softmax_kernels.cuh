// The CUDA kernels of softmax, log_softmax and their backward (softmax_forward.cu and
// softmax_backward.cu instantiate them): one launch per call in general.
// Rows along the softmax dim are reduced by a warp (short rows) or a block (long rows) with CUB's
// warp/block reductions, or by one thread each when the dim is not innermost and rows are many
// (neighbouring rows are then neighbours in memory, so the threads of a warp read coalesced).
// Where that would leave the GPU idle (a handful of very long rows) or read with large strides
// (few rows along an outer dim), the row max and sum come from the reduction engine and one
// elementwise pass writes the output.
#pragma once

#include "ops/norm/cuda/softmax.h"

#include <cub/block/block_reduce.cuh>
#include <cub/warp/warp_reduce.cuh>

#include <vector>

#include "ops/factory/factory.h"
#include "ops/reduce/cuda/reduce.h"
#include "ops/reduce/cuda/reduce_access.cuh"
#include "ops/reduce/cuda/reduce_engine.cuh"
#include "ops/reduce/reduce_functors.h"
#include "tensor/cuda/cuda_check.h"

namespace tg::cuda::softmax_detail {

template <typename T>
struct RowArgs {
  const T* a;
  const T* b;
  T* out;
  RowGeometry ga, gb, go;
};

template <typename T>
__device__ __forceinline__ T exp_of(T v) {
  if constexpr (sizeof(T) == 4) return expf(v);
  else return exp(v);
}

template <typename T>
__device__ __forceinline__ T log_of(T v) {
  if constexpr (sizeof(T) == 4) return logf(v);
  else return log(v);
}

constexpr bool is_forward(SoftmaxMode m) { return m == SoftmaxMode::Softmax || m == SoftmaxMode::LogSoftmax; }

// The per-element term summed over a row (after the row max m, for the forward modes).
template <typename T, SoftmaxMode M>
__device__ __forceinline__ T sum_term(T a, T b, T m) {
  if constexpr (is_forward(M)) return exp_of(a - m);
  else if constexpr (M == SoftmaxMode::SoftmaxBackward) return a * b;
  else return a;
}

// The output element from its inputs and the row's max m and sum s.
template <typename T, SoftmaxMode M>
__device__ __forceinline__ T result(T a, T b, T m, T s) {
  if constexpr (M == SoftmaxMode::Softmax) return exp_of(a - m) / s;
  else if constexpr (M == SoftmaxMode::LogSoftmax) return a - m - log_of(s);
  else if constexpr (M == SoftmaxMode::SoftmaxBackward) return b * (a - s);
  else return a - exp_of(b) * s;
}

// Pointers to one row of each operand.
template <typename T>
struct Row {
  const T* a;
  const T* b;
  T* out;
  __device__ Row(const RowArgs<T>& args, int64_t row)
      : a(args.a + offset_at(args.ga.rows, row)),
        b(args.b ? args.b + offset_at(args.gb.rows, row) : nullptr),
        out(args.out + offset_at(args.go.rows, row)) {}
  __device__ T b_at(int64_t j, int64_t stride) const { return b ? b[j * stride] : T(0); }
};

constexpr int kWarpsPerBlock = 4;

// One warp per row.
template <typename T, SoftmaxMode M>
__global__ void __launch_bounds__(kWarpsPerBlock * 32) warp_rows_kernel(RowArgs<T> args) {
  using WarpReduce = cub::WarpReduce<T>;
  __shared__ typename WarpReduce::TempStorage temp[kWarpsPerBlock];
  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const int64_t row_index = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + warp;
  if (row_index >= args.go.n_rows) return;  // uniform across the warp
  const Row<T> row(args, row_index);
  const int64_t n = args.go.length, sa = args.ga.stride, sb = args.gb.stride, so = args.go.stride;
  T m = 0;
  if constexpr (is_forward(M)) {
    T local = max_identity<T>();
    for (int64_t j = lane; j < n; j += 32) local = MaxCombine{}(local, row.a[j * sa]);
    m = __shfl_sync(0xffffffffu, WarpReduce(temp[warp]).Reduce(local, MaxCombine{}), 0);
    __syncwarp();
  }
  T local = 0;
  for (int64_t j = lane; j < n; j += 32) local += sum_term<T, M>(row.a[j * sa], row.b_at(j, sb), m);
  const T s = __shfl_sync(0xffffffffu, WarpReduce(temp[warp]).Sum(local), 0);
  for (int64_t j = lane; j < n; j += 32) row.out[j * so] = result<T, M>(row.a[j * sa], row.b_at(j, sb), m, s);
}

constexpr int kBlockThreads = 512;

// One block per row, for long rows.
template <typename T, SoftmaxMode M>
__global__ void __launch_bounds__(kBlockThreads) block_rows_kernel(RowArgs<T> args) {
  using BlockReduce = cub::BlockReduce<T, kBlockThreads>;
  __shared__ typename BlockReduce::TempStorage temp;
  __shared__ T shared_value;
  const Row<T> row(args, blockIdx.x);
  const int64_t n = args.go.length, sa = args.ga.stride, sb = args.gb.stride, so = args.go.stride;
  T m = 0;
  if constexpr (is_forward(M)) {
    T local = max_identity<T>();
    for (int64_t j = threadIdx.x; j < n; j += kBlockThreads) local = MaxCombine{}(local, row.a[j * sa]);
    const T reduced = BlockReduce(temp).Reduce(local, MaxCombine{});
    if (threadIdx.x == 0) shared_value = reduced;
    __syncthreads();
    m = shared_value;
    __syncthreads();  // temp and shared_value are reused below
  }
  T local = 0;
  for (int64_t j = threadIdx.x; j < n; j += kBlockThreads) local += sum_term<T, M>(row.a[j * sa], row.b_at(j, sb), m);
  const T reduced = BlockReduce(temp).Sum(local);
  if (threadIdx.x == 0) shared_value = reduced;
  __syncthreads();
  const T s = shared_value;
  for (int64_t j = threadIdx.x; j < n; j += kBlockThreads)
    row.out[j * so] = result<T, M>(row.a[j * sa], row.b_at(j, sb), m, s);
}

// One thread per row, for many rows along a dim that is not innermost.
template <typename T, SoftmaxMode M>
__global__ void thread_rows_kernel(RowArgs<T> args) {
  const int64_t row_index = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (row_index >= args.go.n_rows) return;
  const Row<T> row(args, row_index);
  const int64_t n = args.go.length, sa = args.ga.stride, sb = args.gb.stride, so = args.go.stride;
  T m = 0;
  if constexpr (is_forward(M)) {
    m = max_identity<T>();
    for (int64_t j = 0; j < n; ++j) m = MaxCombine{}(m, row.a[j * sa]);
  }
  T s = 0;
  for (int64_t j = 0; j < n; ++j) s += sum_term<T, M>(row.a[j * sa], row.b_at(j, sb), m);
  for (int64_t j = 0; j < n; ++j) row.out[j * so] = result<T, M>(row.a[j * sa], row.b_at(j, sb), m, s);
}

// exp(a - m[row]): the terms of a forward row sum, after the row max.
template <typename T>
struct ShiftedExpLoad {
  const T* a;
  const T* m;
  __device__ T operator()(int64_t off, int64_t row, int64_t) const { return exp_of(a[off] - m[row]); }
};

// Where a single row's second operand starts (always at its base).
struct SingleRow {};
__host__ __device__ inline int64_t offset_at(SingleRow, int64_t) { return 0; }

// a * b, with b indexed by its own row layout: the terms of the softmax backward row sum.
template <typename T, typename Rows>
struct ProductLoad {
  const T* a;
  const T* b;
  Rows b_rows;
  int64_t b_stride;
  __host__ __device__ T operator()(int64_t off, int64_t row, int64_t j) const {
    return a[off] * b[offset_at(b_rows, row) + j * b_stride];
  }
};

// One thread per output element in memory order (coalesced writes whichever dim the rows run
// along), from the row statistics. The output is contiguous, so its dim stride is the number of
// elements after the dim.
template <typename T, SoftmaxMode M>
__global__ void write_elements_kernel(RowArgs<T> args, const T* m, const T* s, int64_t numel) {
  const int64_t n = args.go.length, inner = args.go.stride;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < numel; i += step) {
    const int64_t row = i / (n * inner) * inner + i % inner;
    const int64_t j = i / inner % n;
    const T a = args.a[offset_at(args.ga.rows, row) + j * args.ga.stride];
    const T b = args.b ? args.b[offset_at(args.gb.rows, row) + j * args.gb.stride] : T(0);
    args.out[i] = result<T, M>(a, b, m ? m[row] : T(0), s[row]);
  }
}

// Rows go through the reduction engine when a block (or warp) per row would leave the GPU idle
// (a few very long rows) or read memory with large strides (a dim that is not innermost, with
// too few rows for a thread each).
inline bool use_engine(const RowGeometry& go, int64_t numel) {
  if (go.n_rows <= 32 && go.length >= 32768) return true;
  return go.stride != 1 && go.length > 1 && go.n_rows < 16384 && numel >= (int64_t{1} << 16);
}

// The row maxima and the plain row sums are amax's and sum's own engine passes (reduce_amax.cu,
// reduce_sum.cu: the same kernels, so the same values), which these files need not compile.
template <typename T, SoftmaxMode M>
void launch_with_engine(const RowArgs<T>& args, const Tensor& a, int64_t dim) {
  const Device device = a.device();
  std::vector<bool> mask(static_cast<size_t>(a.dim()), false);
  mask[static_cast<size_t>(dim)] = true;
  const ReducePlan plan = make_reduce_plan(a.sizes(), a.strides(), mask);
  const int64_t rows = plan.n_out;
  const TensorOptions row_values{.dtype = a.dtype(), .device = device};
  Tensor sums = empty({std::max<int64_t>(1, rows)}, row_values);
  const detail::ValueStore<T> to_sums{sums.data_ptr<T>(), T(1), false};
  Tensor maxes;
  if constexpr (is_forward(M)) {
    maxes = empty({std::max<int64_t>(1, rows)}, row_values);
    amax_reduce(a, plan, maxes);
    detail::reduce(plan, T(0), ShiftedExpLoad<T>{args.a, maxes.data_ptr<T>()}, SumCombine{}, to_sums, device);
  } else if constexpr (M == SoftmaxMode::SoftmaxBackward) {
    if (rows == 1) {
      detail::reduce(plan, T(0), ProductLoad<T, SingleRow>{args.a, args.b, {}, args.gb.stride}, SumCombine{}, to_sums,
                     device);
    } else {
      detail::reduce(plan, T(0), ProductLoad<T, StridedSpace>{args.a, args.b, args.gb.rows, args.gb.stride},
                     SumCombine{}, to_sums, device);
    }
  } else {
    sum_reduce_engine(a, plan, sums, /*mean=*/false);
  }
  const int64_t numel = a.numel();
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(blocks_for(numel, 256), 1 << 16));
  const T* row_max = maxes.defined() ? maxes.data_ptr<T>() : nullptr;
  write_elements_kernel<T, M><<<blocks, 256, 0, current_stream()>>>(args, row_max, to_sums.out, numel);
  TG_CUDA_CHECK_LAUNCH();
}

template <typename T, SoftmaxMode M>
void launch(const RowArgs<T>& args, const Tensor& a, int64_t dim) {
  cudaStream_t stream = current_stream();
  const int64_t rows = args.go.n_rows;
  if (use_engine(args.go, a.numel())) {
    launch_with_engine<T, M>(args, a, dim);
    return;
  }
  if (args.go.stride != 1 && args.go.length > 1 && rows >= 16384) {
    thread_rows_kernel<T, M><<<blocks_for(rows, 256), 256, 0, stream>>>(args);
  } else if (args.go.length <= 1024) {
    warp_rows_kernel<T, M><<<blocks_for(rows, kWarpsPerBlock), kWarpsPerBlock * 32, 0, stream>>>(args);
  } else {
    block_rows_kernel<T, M><<<static_cast<unsigned>(rows), kBlockThreads, 0, stream>>>(args);
  }
  TG_CUDA_CHECK_LAUNCH();
}

// Runs softmax_rows for mode M (each file instantiates its own modes).
template <SoftmaxMode M>
void rows(const Tensor& a, const Tensor& b, int64_t dim, Tensor& out) {
  TG_DISPATCH_FLOAT_DOUBLE(a.dtype(), "softmax", [&] {
    const RowArgs<scalar_t> args{a.data_ptr<scalar_t>(), b.defined() ? b.data_ptr<scalar_t>() : nullptr,
                                 out.data_ptr<scalar_t>(), row_geometry(a, dim),
                                 b.defined() ? row_geometry(b, dim) : RowGeometry{}, row_geometry(out, dim)};
    launch<scalar_t, M>(args, a, dim);
  });
}

}  // namespace tg::cuda::softmax_detail
