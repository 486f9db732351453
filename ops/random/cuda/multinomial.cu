// multinomial on CUDA, in the draw order of ops/random/multinomial_draw.h (so CPU and CUDA agree).
// With replacement: one block per row scans the weights into running sums (double), checking them
// as it goes, then one thread per sample searches its row. Without replacement: one block per row
// checks the weights and writes the race keys, and topk's kernels pick the num_samples largest.
// Bad weights go to the device error record; nothing synchronizes, so the op records into graphs.
#include "ops/random/cuda/multinomial.h"

#include <cub/block/block_scan.cuh>
#include <curand_kernel.h>

#include <algorithm>
#include <type_traits>

#include "ops/factory/factory.h"
#include "ops/index/cuda/topk.h"
#include "ops/index/row_layout.h"
#include "ops/random/multinomial_draw.h"
#include "ops/random/random_dist.h"
#include "tensor/cuda/cuda_check.h"
#include "tensor/cuda/device_error.h"

namespace tg::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kItems = 8;  // weights per thread in a running-sum tile

// The generator state of a launch; inside a recorded graph, `shift` moves it on every replay.
struct Draw {
  uint64_t seed;
  uint64_t offset;
  const int64_t* shift;
};

// The two words of element e (ops/random/multinomial_draw.h), as curand's Philox gives them.
__device__ void draw_words(const Draw& d, int64_t e, uint32_t& hi, uint32_t& lo) {
  uint64_t seed = d.seed, offset = d.offset;
  if (d.shift) {
    offset += static_cast<uint64_t>(d.shift[0]);
    seed = static_cast<uint64_t>(d.shift[1]);
  }
  curandStatePhilox4_32_10_t state;
  curand_init(seed, 0, 4 * (offset + static_cast<uint64_t>(e / 2)), &state);
  const uint4 r = curand4(&state);
  hi = e % 2 ? r.z : r.x;
  lo = e % 2 ? r.w : r.y;
}

template <typename T>
__device__ double weight_at(const T* row, const RowLayout& in, int64_t j) {
  return static_cast<double>(static_cast<acc_type<T>>(row[j * in.dim_stride]));
}

__device__ void check_weight(DeviceErrorRecord* error, double w, int64_t row, int64_t j) {
  if (!(w >= 0) || isinf(w)) report_device_error(error, DeviceErrorOp::MultinomialBadWeight, j, 0, 0, row);
}

// Race keys of every category, row r on block r (grid-stride over rows).
template <typename T, typename K>
__global__ void race_keys_kernel(const T* x, RowLayout in, int64_t rows, int64_t n, Draw draw, K* keys,
                                 DeviceErrorRecord* error) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* row = x + in.row_offset(r);
    int positive = 0;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
      const double w = weight_at(row, in, j);
      check_weight(error, w, r, j);
      positive |= w > 0;
      uint32_t hi, lo;
      draw_words(draw, r * n + j, hi, lo);
      keys[r * n + j] = static_cast<K>(race_key(w, hi, lo));
    }
    if (!__syncthreads_or(positive) && threadIdx.x == 0)
      report_device_error(error, DeviceErrorOp::MultinomialZeroSum, 0, 0, 0, r);
  }
}

// Running sums of each row's weights, row r on block r, one tile of kThreads * kItems at a time
// (each thread scanning kItems consecutive weights, so a vocabulary-sized row takes few tiles).
template <typename T>
__global__ void cdf_kernel(const T* x, RowLayout in, int64_t rows, int64_t n, double* cdf, DeviceErrorRecord* error) {
  using Scan = cub::BlockScan<double, kThreads>;
  __shared__ typename Scan::TempStorage scan;
  __shared__ double carry;
  constexpr int64_t kTile = int64_t{kThreads} * kItems;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* row = x + in.row_offset(r);
    if (threadIdx.x == 0) carry = 0;
    __syncthreads();
    for (int64_t base = 0; base < n; base += kTile) {
      const int64_t first = base + int64_t{threadIdx.x} * kItems;
      double w[kItems];
#pragma unroll
      for (int i = 0; i < kItems; ++i) {
        const int64_t j = first + i;
        w[i] = 0;
        if (j < n) {
          w[i] = weight_at(row, in, j);
          check_weight(error, w[i], r, j);
        }
      }
      Scan(scan).InclusiveSum(w, w);
      const double before = carry;
#pragma unroll
      for (int i = 0; i < kItems; ++i)
        if (first + i < n) cdf[r * n + first + i] = before + w[i];
      __syncthreads();  // every thread has read carry
      if (threadIdx.x == kThreads - 1) carry = before + w[kItems - 1];
      __syncthreads();
    }
    if (threadIdx.x == 0 && carry == 0) report_device_error(error, DeviceErrorOp::MultinomialZeroSum, 0, 0, 0, r);
    __syncthreads();  // carry is reset only after thread 0 read it
  }
}

// One thread per sample: its uniform's category under the row's running sums.
__global__ void sample_kernel(const double* cdf, int64_t rows, int64_t n, int64_t m, Draw draw, int64_t* out) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < rows * m; i += int64_t{gridDim.x} * blockDim.x) {
    uint32_t hi, lo;
    draw_words(draw, i, hi, lo);
    out[i] = sample_from_cdf(cdf + (i / m) * n, n, uniform_double(hi, lo));
  }
}

unsigned grid_for(int64_t n, int per) {
  return static_cast<unsigned>(std::clamp<int64_t>((n + per - 1) / per, 1, int64_t{1} << 20));
}

}  // namespace

void multinomial(const Tensor& weights, int64_t m, bool replacement, PhiloxState state, const Tensor& out) {
  const int64_t n = weights.size(-1);
  const int64_t rows = weights.dim() == 2 ? weights.size(0) : 1;
  if (rows == 0 || m == 0) return;
  const RowLayout in = row_layout(weights, weights.dim() - 1, "multinomial");
  DeviceErrorRecord* error = device_error_record(weights.device().index);
  Draw draw{state.seed, state.offset, nullptr};
  if (CaptureRandomness* capture = current_capture_randomness()) {
    draw.shift = capture->device_shift;
    capture->note(state.offset, (static_cast<uint64_t>(rows) * static_cast<uint64_t>(replacement ? m : n) + 1) / 2);
  }
  cudaStream_t stream = current_stream();
  const Device device = weights.device();
  TG_DISPATCH_FLOATING(weights.dtype(), "multinomial", [&] {
    const scalar_t* x = weights.data_ptr<scalar_t>();
    if (replacement) {
      Tensor cdf = empty({rows, n}, {.dtype = kFloat64, .device = device});
      cdf_kernel<scalar_t><<<grid_for(rows, 1), kThreads, 0, stream>>>(x, in, rows, n, cdf.data_ptr<double>(), error);
      TG_CUDA_CHECK_LAUNCH();
      sample_kernel<<<grid_for(rows * m, kThreads), kThreads, 0, stream>>>(cdf.data_ptr<double>(), rows, n, m, draw,
                                                                          out.data_ptr<int64_t>());
      TG_CUDA_CHECK_LAUNCH();
      return;
    }
    // Keys in float for every dtype but double, as the CPU ranks them.
    using K = std::conditional_t<std::is_same_v<scalar_t, double>, double, float>;
    const DType key_dtype = std::is_same_v<K, double> ? kFloat64 : kFloat32;
    Tensor keys = empty(weights.dim() == 2 ? Shape{rows, n} : Shape{n}, {.dtype = key_dtype, .device = device});
    race_keys_kernel<scalar_t, K><<<grid_for(rows, 1), kThreads, 0, stream>>>(x, in, rows, n, draw, keys.data_ptr<K>(),
                                                                              error);
    TG_CUDA_CHECK_LAUNCH();
    topk(keys, m, keys.dim() - 1, /*largest=*/true, Tensor(), out);
  });
}

}  // namespace tg::cuda
