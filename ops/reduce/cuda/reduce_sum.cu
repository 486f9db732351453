// CUDA launchers for sum and mean on top of the reduction engine, and their instances.
#include <algorithm>
#include <cstdint>

#include "ops/core/cuda/aligned_vector.cuh"
#include "ops/core/dispatch_groups.h"
#include "ops/reduce/cuda/column_sum.cuh"
#include "ops/reduce/cuda/reduce.h"
#include "ops/reduce/cuda/reduce_access.cuh"
#include "ops/reduce/cuda/reduce_device_wide.cuh"
#include "ops/reduce/reduce_functors.h"

namespace tg::cuda {
namespace {

// Sums (or means) of the columns of a row-major [rows, cols] matrix (a bias gradient), where the
// general engine would take a partial pass and a final pass over strided elements.
template <typename T>
__global__ void column_sum_kernel(const T* __restrict__ x, int64_t rows, int64_t cols, int64_t chunk_rows,
                                  detail::ValueStore<T> store, acc_type<T>* partial) {
  using Acc = acc_type<T>;
  sum_block_columns<Acc>(
      rows, cols, chunk_rows, [&](int64_t at) { return static_cast<Acc>(x[at]); }, store, partial);
}

// column_sum_kernel reading VEC adjacent columns per thread as one aligned access.
template <typename T, int VEC>
__global__ void column_sum_vector_kernel(const T* __restrict__ x, int64_t rows, int64_t cols, int64_t chunk_rows,
                                         detail::ValueStore<T> store, acc_type<T>* partial) {
  sum_block_column_vectors<acc_type<T>, VEC>(x, rows, cols, chunk_rows, store, partial);
}

// True when `plan` sums the rows of a row-major matrix: outputs adjacent in memory, one reduced dim
// whose stride is the row length, and enough of both for the column kernel to fill the device.
bool is_column_sum(const ReducePlan& p) {
  return p.kept.ndim == 1 && p.kept.strides[0] == 1 && p.reduced.ndim == 1 && p.reduced.strides[0] == p.n_out &&
         p.n_out >= kSumColumns && p.n_red >= kSumRowGroups;
}

// sum_reduce for int32 and int64 x and out: the reduction engine.
void sum_reduce_integer(const Tensor& x, const ReducePlan& plan, Tensor& out, bool mean) {
  TG_DISPATCH_INTEGER(out.dtype(), mean ? "mean" : "sum", [&] {
    const detail::ValueStore<scalar_t> store{out.data_ptr<scalar_t>(), static_cast<scalar_t>(plan.n_red), mean};
    detail::reduce(plan, scalar_t(0), detail::ValueLoad<scalar_t>{x.data_ptr<scalar_t>()}, SumCombine{}, store,
                   x.device());
  });
}

// sum_reduce of the floating dtypes; `columns` lets a column sum take its own kernel.
void sum_reduce_floating(const Tensor& x, const ReducePlan& plan, Tensor& out, bool mean, bool columns) {
  TG_DISPATCH_FLOATING(out.dtype(), mean ? "mean" : "sum", [&] {
    using acc_t = acc_type<scalar_t>;  // 16-bit floats sum in float
    const detail::ValueStore<scalar_t> store{out.data_ptr<scalar_t>(), static_cast<acc_t>(plan.n_red), mean};
    if (columns && is_column_sum(plan)) {
      const scalar_t* src = x.data_ptr<scalar_t>();
      // Rows of 16-byte aligned vectors: each thread reads 16 bytes (at most 8 columns) at a time.
      constexpr int kVec = std::min<int>(8, static_cast<int>(16 / sizeof(scalar_t)));
      const bool vectors = plan.n_out % kVec == 0 && aligned_16(src);
      run_column_sum<acc_t>(
          plan.n_red, plan.n_out, x.device(), store,
          [&](dim3 grid, dim3 block, int64_t chunk_rows, acc_t* partial) {
            if (vectors) {
              column_sum_vector_kernel<scalar_t, kVec><<<grid, block, 0, current_stream()>>>(
                  src, plan.n_red, plan.n_out, chunk_rows, store, partial);
            } else {
              column_sum_kernel<scalar_t><<<grid, block, 0, current_stream()>>>(src, plan.n_red, plan.n_out,
                                                                                 chunk_rows, store, partial);
            }
          },
          vectors ? kVec : 1);
      return;
    }
    detail::reduce(plan, acc_t(0), detail::ValueLoad<scalar_t>{x.data_ptr<scalar_t>()}, SumCombine{}, store,
                   x.device());
  });
}

}  // namespace

void sum_reduce(const Tensor& x, const ReducePlan& plan, Tensor& out, bool mean) {
  if (!is_floating(out.dtype())) return sum_reduce_integer(x, plan, out, mean);
  sum_reduce_floating(x, plan, out, mean, true);
}

void sum_reduce_engine(const Tensor& x, const ReducePlan& plan, Tensor& out, bool mean) {
  TG_CHECK(is_floating(out.dtype()), "[sum] sum_reduce_engine takes floating dtypes, got ", dtype_name(out.dtype()));
  sum_reduce_floating(x, plan, out, mean, false);
}

}  // namespace tg::cuda
