// layer_norm's register-resident kernels (ops/norm/cuda/row_norm_vectorized.h). A warp takes a row
// of up to 1024 elements as 4-element vectors, kVecs of them per lane, and holds it in registers
// between the passes that the general kernels (row_norm.cu) make over memory. The numerics are
// theirs: float32 statistics, the mean summed shifted by the row's first value, w*gy rounded
// before it is both summed and subtracted.
#include "ops/norm/cuda/row_norm_vectorized.h"

#include <algorithm>
#include <cstdint>

#include "ops/core/cuda/aligned_vector.cuh"
#include "ops/factory/factory.h"
#include "ops/reduce/cuda/column_sum.cuh"
#include "tensor/cuda/cuda_check.h"
#include "tensor/cuda/device_guard.h"
#include "tensor/half.h"

namespace tg::cuda {
namespace {

constexpr int kVec = 4;          // elements per vector
constexpr int kWarps = 8;        // warps (rows in flight) per block
constexpr int kMaxCols = 1024;   // 32 lanes x 8 vectors x 4 elements
constexpr int64_t kMaxBackwardBlocks = 256;  // blocks of the backward, whose partials a finish adds

// Loads the 4 elements at p[at..at+3] as floats.
template <typename T>
__device__ __forceinline__ void load_vec(const T* p, int64_t at, float (&out)[kVec]) {
  const AlignedVector<T, kVec> pack = *reinterpret_cast<const AlignedVector<T, kVec>*>(p + at);
#pragma unroll
  for (int k = 0; k < kVec; ++k) out[k] = static_cast<float>(pack.v[k]);
}

template <typename T>
__device__ __forceinline__ void store_vec(T* p, int64_t at, const float (&in)[kVec]) {
  AlignedVector<T, kVec> pack;
#pragma unroll
  for (int k = 0; k < kVec; ++k) pack.v[k] = static_cast<T>(in[k]);
  *reinterpret_cast<AlignedVector<T, kVec>*>(p + at) = pack;
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// The first column of vector i of this lane (vectors are interleaved across lanes).
__device__ __forceinline__ int column_of(int i, int lane) { return (i * 32 + lane) * kVec; }

template <typename T, typename W, int kVecs>
__global__ void __launch_bounds__(32 * kWarps)
    forward_kernel(const T* __restrict__ x, const W* __restrict__ w, const W* __restrict__ b, int64_t rows, int cols,
                   float eps, T* __restrict__ y, float* __restrict__ mean_out, float* __restrict__ rstd_out) {
  const int lane = threadIdx.x % 32;
  const int64_t r = static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32;
  if (r >= rows) return;
  const T* xr = x + r * cols;
  float v[kVecs][kVec];
  const float shift = static_cast<float>(xr[0]);
  float s = 0;
#pragma unroll
  for (int i = 0; i < kVecs; ++i) {
    const int c = column_of(i, lane);
    if (c < cols) {
      load_vec(xr, c, v[i]);
#pragma unroll
      for (int k = 0; k < kVec; ++k) s += v[i][k] - shift;
    }
  }
  const float n = static_cast<float>(cols);
  const float mu = shift + warp_sum(s) / n;
  float q = 0;
#pragma unroll
  for (int i = 0; i < kVecs; ++i) {
    if (column_of(i, lane) < cols) {
#pragma unroll
      for (int k = 0; k < kVec; ++k) {
        const float d = v[i][k] - mu;
        q += d * d;
      }
    }
  }
  const float rstd = rsqrtf(warp_sum(q) / n + eps);
  T* yr = y + r * cols;
#pragma unroll
  for (int i = 0; i < kVecs; ++i) {
    const int c = column_of(i, lane);
    if (c >= cols) continue;
    float out[kVec], wv[kVec], bv[kVec];
    if (w) load_vec(w, c, wv);
    if (b) load_vec(b, c, bv);
#pragma unroll
    for (int k = 0; k < kVec; ++k) {
      float o = (v[i][k] - mu) * rstd;
      if (w) o *= wv[k];
      if (b) o += bv[k];
      out[k] = o;
    }
    store_vec(yr, c, out);
  }
  if (lane == 0) {
    mean_out[r] = mu;
    rstd_out[r] = rstd;
  }
}

// Each warp walks rows r = warp, warp + all warps, ...: writes gx and adds gy*xhat and gy into its
// lanes' column partials; a block then adds its warps' partials in warp order into
// partial[block][0 | 1][cols] (when `partial` is set).
template <typename T, typename W, int kVecs>
__global__ void __launch_bounds__(32 * kWarps)
    backward_kernel(const T* __restrict__ gy, const T* __restrict__ x, const W* __restrict__ w,
                    const float* __restrict__ mean, const float* __restrict__ rstd_in, int64_t rows, int cols,
                    T* __restrict__ gx, float* __restrict__ partial) {
  extern __shared__ float block_sums[];  // [2][cols] when partial is set
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  float dw[kVecs][kVec] = {}, db[kVecs][kVec] = {};
  const float n = static_cast<float>(cols);
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * kWarps + warp; r < rows;
       r += static_cast<int64_t>(gridDim.x) * kWarps) {
    const T* gr = gy + r * cols;
    const T* xr = x + r * cols;
    const float mu = mean[r], rs = rstd_in[r];
    float g[kVecs][kVec], xh[kVecs][kVec];
    float a = 0, c2 = 0;
#pragma unroll
    for (int i = 0; i < kVecs; ++i) {
      const int c = column_of(i, lane);
      if (c >= cols) continue;
      float wv[kVec];
      load_vec(gr, c, g[i]);
      load_vec(xr, c, xh[i]);
      if (w) load_vec(w, c, wv);
#pragma unroll
      for (int k = 0; k < kVec; ++k) {
        xh[i][k] = (xh[i][k] - mu) * rs;
        dw[i][k] += g[i][k] * xh[i][k];
        db[i][k] += g[i][k];
        if (w) g[i][k] = __fmul_rn(g[i][k], wv[k]);
        a += g[i][k];
        c2 += g[i][k] * xh[i][k];
      }
    }
    const float mean_wg = warp_sum(a) / n;
    const float mean_wg_xhat = warp_sum(c2) / n;
    T* out = gx + r * cols;
#pragma unroll
    for (int i = 0; i < kVecs; ++i) {
      const int c = column_of(i, lane);
      if (c >= cols) continue;
      float o[kVec];
#pragma unroll
      for (int k = 0; k < kVec; ++k) o[k] = rs * (g[i][k] - mean_wg - xh[i][k] * mean_wg_xhat);
      store_vec(out, c, o);
    }
  }
  if (!partial) return;
  for (int turn = 0; turn < kWarps; ++turn) {
    if (warp == turn) {
#pragma unroll
      for (int i = 0; i < kVecs; ++i) {
        const int c = column_of(i, lane);
        if (c >= cols) continue;
#pragma unroll
        for (int k = 0; k < kVec; ++k) {
          block_sums[c + k] = turn == 0 ? dw[i][k] : block_sums[c + k] + dw[i][k];
          block_sums[cols + c + k] = turn == 0 ? db[i][k] : block_sums[cols + c + k] + db[i][k];
        }
      }
    }
    __syncthreads();
  }
  float* mine = partial + static_cast<int64_t>(blockIdx.x) * 2 * cols;
  for (int j = threadIdx.x; j < 2 * cols; j += blockDim.x) mine[j] = block_sums[j];
}

// The parameters' gradients from the finish pass over partial[block][0 | 1][cols], read as
// [block][2 * cols]: column j < cols is gw[j], column cols + j is gb[j].
template <typename W>
struct ParamStore {
  W* gw;
  W* gb;
  int cols;
  __device__ void operator()(int64_t j, float total) const {
    if (j < cols) {
      if (gw) gw[j] = static_cast<W>(total);
    } else if (gb) {
      gb[j - cols] = static_cast<W>(total);
    }
  }
};

template <typename P>
P* ptr_or_null(const Tensor& t) {
  return t.defined() ? t.data_ptr<P>() : nullptr;
}

// Calls f.template operator()<kVecs>() with the fewest vectors per lane that hold a row.
template <typename F>
void with_vecs(int cols, F&& f) {
  const int vecs = (cols + 32 * kVec - 1) / (32 * kVec);
  if (vecs <= 2) return f.template operator()<2>();
  if (vecs <= 4) return f.template operator()<4>();
  if (vecs <= 6) return f.template operator()<6>();
  return f.template operator()<8>();
}

// Calls f.template operator()<T, W>() for the vectorizable element and parameter types.
template <typename F>
void dispatch_vectorized(DType x, DType params, F&& f) {
  switch (x) {
    case DType::Float32: return f.template operator()<float, float>();
    case DType::BFloat16:
      return params == kFloat32 ? f.template operator()<BFloat16, float>()
                                : f.template operator()<BFloat16, BFloat16>();
    case DType::Float16:
      return params == kFloat32 ? f.template operator()<Half, float>() : f.template operator()<Half, Half>();
    default: TG_FAIL("[layer_norm] no vectorized kernel for ", dtype_name(x));
  }
}

}  // namespace

bool row_norm_vectorizable(const RowNormGeometry& g, const Tensor& x, std::initializer_list<const Tensor*> operands) {
  if (g.groups != 1 || g.inner != 1 || g.cols() % kVec != 0 || g.cols() > kMaxCols || g.cols() == 0) return false;
  if (x.dtype() != kFloat32 && x.dtype() != kBFloat16 && x.dtype() != kFloat16) return false;
  for (const Tensor* t : operands) {
    if (!t->defined()) continue;
    const auto bytes = static_cast<uintptr_t>(t->element_size() * kVec);
    if (reinterpret_cast<uintptr_t>(t->raw_data()) % bytes != 0) return false;
  }
  return true;
}

void row_norm_forward_vectorized(const Tensor& x, const Tensor& w, const Tensor& b, const RowNormGeometry& g,
                                 const Tensor& y, const Tensor& mean, const Tensor& rstd) {
  DeviceGuard guard(y.device().index);
  const int64_t rows = g.rows();
  const int cols = static_cast<int>(g.cols());
  const unsigned blocks = static_cast<unsigned>((rows + kWarps - 1) / kWarps);
  dispatch_vectorized(x.dtype(), row_norm_param_dtype(x, w, b), [&]<typename T, typename W>() {
    with_vecs(cols, [&]<int kVecs>() {
      forward_kernel<T, W, kVecs><<<blocks, 32 * kWarps, 0, current_stream()>>>(
          x.data_ptr<T>(), ptr_or_null<W>(w), ptr_or_null<W>(b), rows, cols, static_cast<float>(g.eps),
          y.data_ptr<T>(), mean.data_ptr<float>(), rstd.data_ptr<float>());
    });
  });
  TG_CUDA_CHECK_LAUNCH();
}

void row_norm_backward_vectorized(const Tensor& gy, const Tensor& x, const Tensor& w, const Tensor& mean,
                                  const Tensor& rstd, const RowNormGeometry& g, const Tensor& gx, const Tensor& gw,
                                  const Tensor& gb) {
  DeviceGuard guard(gx.device().index);
  cudaStream_t stream = current_stream();
  const int64_t rows = g.rows();
  const int cols = static_cast<int>(g.cols());
  const bool params = gw.defined() || gb.defined();
  const int64_t blocks = std::clamp<int64_t>((rows + kWarps - 1) / kWarps, 1, kMaxBackwardBlocks);
  Tensor partial;
  if (params) partial = empty({blocks * 2 * cols}, {.dtype = kFloat32, .device = gx.device()});
  const size_t shared = params ? 2 * cols * sizeof(float) : 0;
  const DType param_dtype = w.defined() ? w.dtype() : row_norm_param_dtype(x, gw, gb);
  dispatch_vectorized(x.dtype(), param_dtype, [&]<typename T, typename W>() {
    with_vecs(cols, [&]<int kVecs>() {
      backward_kernel<T, W, kVecs><<<static_cast<unsigned>(blocks), 32 * kWarps, shared, stream>>>(
          gy.data_ptr<T>(), x.data_ptr<T>(), ptr_or_null<W>(w), mean.data_ptr<float>(), rstd.data_ptr<float>(),
          rows, cols, gx.data_ptr<T>(), params ? partial.data_ptr<float>() : nullptr);
    });
    TG_CUDA_CHECK_LAUNCH();
    if (!params) return;
    const ParamStore<W> store{ptr_or_null<W>(gw), ptr_or_null<W>(gb), cols};
    finish_column_sums<float><<<blocks_for(2 * cols, kSumColumns), dim3(kSumColumns, kFinishRows), 0, stream>>>(
        partial.data_ptr<float>(), blocks, 2 * int64_t{cols}, store);
    TG_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace tg::cuda
