// layer_norm's and group_norm's kernels (ops/norm/row_norm.h); layer_norm rows of up to 1024
// elements take the register-resident kernels of row_norm_vectorized.cu instead. The forward and
// the input gradient take one row per warp when rows are short (four rows a block) and one row per
// block of eight warps otherwise; a row is read from global memory once per pass, with float32
// accumulation for 16-bit and float32 elements and double for float64. The parameters' gradients
// are column sums over chunks of rows into float scratch, then a finish that sums the chunks.
#include <algorithm>
#include <cstdint>

#include "ops/factory/factory.h"
#include "ops/norm/row_norm.h"
#include "ops/norm/cuda/row_norm_vectorized.h"
#include "tensor/cuda/cuda_check.h"
#include "tensor/cuda/device_guard.h"
#include "tensor/half.h"

namespace tg::cuda {
namespace {

constexpr int64_t kLongRow = 1024;  // rows longer than this take a block of kBlockWarps warps each
constexpr int kBlockWarps = 8;
constexpr int kRowsPerWarpBlock = 4;

template <typename T>
using Acc = acc_type<T>;

// The sum of v over the threads of one row: a warp, or kWarps warps through `scratch`.
template <int kWarps, typename A>
__device__ A row_sum(A v, A* scratch) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  if constexpr (kWarps == 1) {
    return v;
  } else {
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    __syncthreads();  // the previous call's readers are done with scratch
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    A total = 0;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) total += scratch[w];
    return total;
  }
}

template <typename A>
__device__ A inverse_sqrt(A v) {
  if constexpr (sizeof(A) == 8) {
    return 1.0 / sqrt(v);
  } else {
    return rsqrtf(v);
  }
}

// a * b rounded, never contracted into a later add: w*gy must be the same value where it is summed
// and where the sum is subtracted from it, or a row of one element gets a nonzero gradient.
__device__ __forceinline__ float rounded_product(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ double rounded_product(double a, double b) { return __dmul_rn(a, b); }

// The row this thread works on, or -1 (whole warps or blocks agree, so barriers stay uniform).
__device__ int64_t row_of(int64_t rows) {
  const int64_t r = static_cast<int64_t>(blockIdx.x) * blockDim.y + threadIdx.y;
  return r < rows ? r : -1;
}

template <typename T, typename W, int kWarps>
__global__ void forward_kernel(const T* x, const W* w, const W* b, RowNormGeometry g, T* y, Acc<T>* mean_out,
                               Acc<T>* rstd_out) {
  using A = Acc<T>;
  __shared__ A scratch[kWarps];
  const int64_t r = row_of(g.rows());
  if (r < 0) return;
  const int64_t cols = g.cols();
  const int stride = 32 * kWarps;
  const T* xr = x + r * cols;
  // The mean is summed shifted by the row's first value: a row of equal values then has exactly that
  // value as its mean and a variance of 0 (sum / n alone can miss it by an ulp, which rstd of about
  // 1/sqrt(eps) turns into an output that is not the bias).
  const A shift = cols > 0 ? static_cast<A>(xr[0]) : A(0);
  A s = 0;
  for (int64_t j = threadIdx.x; j < cols; j += stride) s += static_cast<A>(xr[j]) - shift;
  const A mu = shift + row_sum<kWarps>(s, scratch) / static_cast<A>(cols);
  A q = 0;
  for (int64_t j = threadIdx.x; j < cols; j += stride) {
    const A d = static_cast<A>(xr[j]) - mu;
    q += d * d;
  }
  const A rstd = inverse_sqrt(row_sum<kWarps>(q, scratch) / static_cast<A>(cols) + static_cast<A>(g.eps));
  T* yr = y + r * cols;
  for (int64_t j = threadIdx.x; j < cols; j += stride) {
    const int64_t p = g.param_of(r, j);
    A v = (static_cast<A>(xr[j]) - mu) * rstd;
    if (w) v *= static_cast<A>(w[p]);
    if (b) v += static_cast<A>(b[p]);
    yr[j] = static_cast<T>(v);
  }
  if (threadIdx.x == 0) {
    mean_out[r] = mu;
    rstd_out[r] = rstd;
  }
}

template <typename T, typename W, int kWarps>
__global__ void input_grad_kernel(const T* gy, const T* x, const W* w, const Acc<T>* mean, const Acc<T>* rstd_in,
                                  RowNormGeometry g, T* gx) {
  using A = Acc<T>;
  __shared__ A scratch[kWarps];
  const int64_t r = row_of(g.rows());
  if (r < 0) return;
  const int64_t cols = g.cols();
  const int stride = 32 * kWarps;
  const T* gr = gy + r * cols;
  const T* xr = x + r * cols;
  const A mu = mean[r], rstd = rstd_in[r];
  A a = 0, c = 0;
  for (int64_t j = threadIdx.x; j < cols; j += stride) {
    A wg = static_cast<A>(gr[j]);
    if (w) wg = rounded_product(wg, static_cast<A>(w[g.param_of(r, j)]));
    a += wg;
    c += wg * (static_cast<A>(xr[j]) - mu) * rstd;
  }
  const A n = static_cast<A>(cols);
  const A mean_wg = row_sum<kWarps>(a, scratch) / n;
  const A mean_wg_xhat = row_sum<kWarps>(c, scratch) / n;
  T* out = gx + r * cols;
  for (int64_t j = threadIdx.x; j < cols; j += stride) {
    A wg = static_cast<A>(gr[j]);
    if (w) wg = rounded_product(wg, static_cast<A>(w[g.param_of(r, j)]));
    const A xhat = (static_cast<A>(xr[j]) - mu) * rstd;
    out[j] = static_cast<T>(rstd * (wg - mean_wg - xhat * mean_wg_xhat));
  }
}

// Block (tile of 32 parameters, chunk k of the outer dim): partial[k][p] = {Σ gy·xhat, Σ gy} over
// the chunk's (outer, inner) elements of parameter p.
constexpr int kColThreadsY = 8;

template <typename T>
__global__ void param_partial_kernel(const T* gy, const T* x, const Acc<T>* mean, const Acc<T>* rstd, RowNormGeometry g,
                                     int64_t per_chunk, Acc<T>* partial) {
  using A = Acc<T>;
  __shared__ A sw[kColThreadsY][32], sb[kColThreadsY][32];
  const int64_t P = g.params();
  const int64_t p = static_cast<int64_t>(blockIdx.x) * 32 + threadIdx.x;
  const int64_t o0 = static_cast<int64_t>(blockIdx.y) * per_chunk;
  const int64_t o1 = min(g.outer, o0 + per_chunk);
  A acc_w = 0, acc_b = 0;
  if (p < P) {
    const int64_t group = p / g.channels;
    for (int64_t o = o0 + threadIdx.y; o < o1; o += kColThreadsY) {
      const int64_t r = o * g.groups + group;
      const A mu = mean[r], rs = rstd[r];
      const int64_t base = o * P * g.inner + p * g.inner;
      for (int64_t i = 0; i < g.inner; ++i) {
        const A gv = static_cast<A>(gy[base + i]);
        acc_w += gv * (static_cast<A>(x[base + i]) - mu) * rs;
        acc_b += gv;
      }
    }
  }
  sw[threadIdx.y][threadIdx.x] = acc_w;
  sb[threadIdx.y][threadIdx.x] = acc_b;
  __syncthreads();
  if (threadIdx.y == 0 && p < P) {
    A tw = 0, tb = 0;
#pragma unroll
    for (int k = 0; k < kColThreadsY; ++k) {
      tw += sw[k][threadIdx.x];
      tb += sb[k][threadIdx.x];
    }
    partial[(static_cast<int64_t>(blockIdx.y) * P + p) * 2] = tw;
    partial[(static_cast<int64_t>(blockIdx.y) * P + p) * 2 + 1] = tb;
  }
}

template <typename A, typename W>
__global__ void param_finish_kernel(const A* partial, int64_t P, int64_t chunks, W* gw, W* gb) {
  const int64_t p = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (p >= P) return;
  A tw = 0, tb = 0;
  for (int64_t k = 0; k < chunks; ++k) {
    tw += partial[(k * P + p) * 2];
    tb += partial[(k * P + p) * 2 + 1];
  }
  if (gw) gw[p] = static_cast<W>(tw);
  if (gb) gb[p] = static_cast<W>(tb);
}

// Launches `kernel<kWarps>` over the rows: a warp per row for short rows, a block otherwise.
template <typename Launch>
void launch_rows(const RowNormGeometry& g, Launch&& launch) {
  const int64_t rows = g.rows();
  if (g.cols() > kLongRow) {
    launch.template operator()<kBlockWarps>(dim3(static_cast<unsigned>(rows)), dim3(32 * kBlockWarps, 1));
  } else {
    const unsigned blocks = static_cast<unsigned>((rows + kRowsPerWarpBlock - 1) / kRowsPerWarpBlock);
    launch.template operator()<1>(dim3(blocks), dim3(32, kRowsPerWarpBlock));
  }
  TG_CUDA_CHECK_LAUNCH();
}

}  // namespace

void row_norm_forward(const Tensor& x, const Tensor& w, const Tensor& b, const RowNormGeometry& g, const Tensor& y,
                      const Tensor& mean, const Tensor& rstd) {
  if (g.rows() == 0) return;
  if (row_norm_vectorizable(g, x, {&x, &w, &b, &y})) return row_norm_forward_vectorized(x, w, b, g, y, mean, rstd);
  DeviceGuard guard(y.device().index);
  cudaStream_t stream = current_stream();
  const DType params = row_norm_param_dtype(x, w, b);
  dispatch_row_norm("row_norm", x.dtype(), params, [&]<typename T, typename W>() {
    using A = Acc<T>;
    launch_rows(g, [&]<int kWarps>(dim3 grid, dim3 block) {
      forward_kernel<T, W, kWarps><<<grid, block, 0, stream>>>(x.data_ptr<T>(), w.data_ptr_or_null<W>(),
                                                               b.data_ptr_or_null<W>(), g, y.data_ptr<T>(),
                                                               mean.data_ptr<A>(), rstd.data_ptr<A>());
    });
  });
}

void row_norm_backward(const Tensor& gy, const Tensor& x, const Tensor& w, const Tensor& mean, const Tensor& rstd,
                       const RowNormGeometry& g, const Tensor& gx, const Tensor& gw, const Tensor& gb) {
  if (gx.defined() && row_norm_vectorizable(g, x, {&gy, &x, &w, &gx, &gw, &gb})) {
    return row_norm_backward_vectorized(gy, x, w, mean, rstd, g, gx, gw, gb);
  }
  DeviceGuard guard(gx.device().index);
  cudaStream_t stream = current_stream();
  const DType params = w.defined() ? w.dtype() : row_norm_param_dtype(x, gw, gb);
  dispatch_row_norm("row_norm", x.dtype(), params, [&]<typename T, typename W>() {
    using A = Acc<T>;
    if (g.rows() > 0 && g.cols() > 0 && gx.defined()) {
      launch_rows(g, [&]<int kWarps>(dim3 grid, dim3 block) {
        input_grad_kernel<T, W, kWarps><<<grid, block, 0, stream>>>(gy.data_ptr<T>(), x.data_ptr<T>(),
                                                                    w.data_ptr_or_null<W>(), mean.data_ptr<A>(),
                                                                    rstd.data_ptr<A>(), g, gx.data_ptr<T>());
      });
    }
    if (!gw.defined() && !gb.defined()) return;
    const int64_t P = g.params();
    if (P == 0) return;
    const int64_t tiles = (P + 31) / 32;
    const int64_t want = std::clamp<int64_t>((512 + tiles - 1) / tiles, 1, std::max<int64_t>(g.outer, 1));
    const int64_t per_chunk = std::max<int64_t>((g.outer + want - 1) / want, 1);
    const int64_t chunks = std::max<int64_t>((g.outer + per_chunk - 1) / per_chunk, 1);
    const DType acc_dtype = sizeof(A) == 8 ? kFloat64 : kFloat32;
    const Tensor work = empty({chunks * P * 2}, {.dtype = acc_dtype, .device = gx.device()});
    param_partial_kernel<T><<<dim3(static_cast<unsigned>(tiles), static_cast<unsigned>(chunks)),
                              dim3(32, kColThreadsY), 0, stream>>>(gy.data_ptr<T>(), x.data_ptr<T>(),
                                                                   mean.data_ptr<A>(), rstd.data_ptr<A>(), g,
                                                                   per_chunk, work.data_ptr<A>());
    TG_CUDA_CHECK_LAUNCH();
    param_finish_kernel<A, W><<<static_cast<unsigned>((P + 127) / 128), 128, 0, stream>>>(
        work.data_ptr<A>(), P, chunks, gw.data_ptr_or_null<W>(), gb.data_ptr_or_null<W>());
    TG_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace tg::cuda
