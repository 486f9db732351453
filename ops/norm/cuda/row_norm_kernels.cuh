// layer_norm's register-resident kernels, shared by plain layer_norm and add_layer_norm (both
// launched from row_norm_vectorized.cu). A warp takes a row of up to 1024 elements as 4-element
// vectors, kVecs of them per lane, and holds it in registers between the passes that the general
// kernels (row_norm.cu) make over memory. The numerics are theirs: float32 statistics, the mean
// summed shifted by the row's first value, w*gy rounded before it is both summed and subtracted.
//
// The add_layer_norm forms only add operands: the forward first forms s = x + u rounded to T (what
// a separate add writes), and the backward reads gy in its own dtype G, adds a gradient `acc`
// after rounding its result to T, and writes that sum again in U. Every value is rounded where the
// separate ops (add, layer_norm, the casts, the gradients' sum) would round it, so both give the
// same bits. Plain layer_norm passes null for the extra operands.
#pragma once

#include <algorithm>
#include <cstdint>

#include "ops/core/cuda/aligned_vector.cuh"
#include "ops/factory/factory.h"
#include "ops/reduce/cuda/column_sum.cuh"
#include "tensor/cuda/cuda_check.h"
#include "tensor/half.h"

namespace tg::cuda::row_norm_kernels {

constexpr int kVec = 4;                      // elements per vector
constexpr int kWarps = 8;                    // warps (rows in flight) per block
constexpr int kMaxCols = 1024;               // 32 lanes x 8 vectors x 4 elements

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

// v rounded to T and read back as a float (the identity for float).
template <typename T>
__device__ __forceinline__ float round_to(float v) {
  return static_cast<float>(static_cast<T>(v));
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// The first column of vector i of this lane (vectors are interleaved across lanes).
__device__ __forceinline__ int column_of(int i, int lane) { return (i * 32 + lane) * kVec; }

// One row per warp: y = layer_norm(x [+ u]) in Y, with the sum written to s when u is set.
template <typename T, typename U, typename Y, typename W, int kVecs>
__global__ void __launch_bounds__(32 * kWarps)
    forward_kernel(const T* __restrict__ x, const U* __restrict__ u, const W* __restrict__ w,
                   const W* __restrict__ b, int64_t rows, int cols, float eps, T* __restrict__ s,
                   Y* __restrict__ y, float* __restrict__ mean_out, float* __restrict__ rstd_out) {
  const int lane = threadIdx.x % 32;
  const int64_t r = static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32;
  if (r >= rows) return;
  const T* xr = x + r * cols;
  const U* ur = u ? u + r * cols : nullptr;
  float v[kVecs][kVec];
  const float shift = ur ? round_to<T>(static_cast<float>(xr[0]) + static_cast<float>(ur[0]))
                         : static_cast<float>(xr[0]);
  float sum = 0;
#pragma unroll
  for (int i = 0; i < kVecs; ++i) {
    const int c = column_of(i, lane);
    if (c < cols) {
      load_vec(xr, c, v[i]);
      if (ur) {
        float uv[kVec];
        load_vec(ur, c, uv);
#pragma unroll
        for (int k = 0; k < kVec; ++k) v[i][k] = round_to<T>(v[i][k] + uv[k]);
        store_vec(s + r * cols, c, v[i]);
      }
#pragma unroll
      for (int k = 0; k < kVec; ++k) sum += v[i][k] - shift;
    }
  }
  const float n = static_cast<float>(cols);
  const float mu = shift + warp_sum(sum) / n;
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
  Y* yr = y + r * cols;
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
      // Rounded as layer_norm's own output first, then as the cast to Y would round it.
      out[k] = round_to<T>(o);
    }
    store_vec(yr, c, out);
  }
  if (lane == 0) {
    mean_out[r] = mu;
    rstd_out[r] = rstd;
  }
}

// Blocks of the backward that one SM holds at once: the column partials live in shared memory
// (kWarps x 2 x cols floats a block), not registers, so that registers allow three (80 registers a
// thread, without spills up to 6 vectors a lane); rows of 8 vectors keep two.
constexpr int backward_blocks_per_sm(int vecs) { return vecs > 6 ? 2 : 3; }

// Adds a[k] to the 4 floats at p (a lane's own columns of a warp's partial row).
__device__ __forceinline__ void add_to_shared(float* p, const float (&a)[kVec]) {
  float4 v = *reinterpret_cast<float4*>(p);
  v.x += a[0];
  v.y += a[1];
  v.z += a[2];
  v.w += a[3];
  *reinterpret_cast<float4*>(p) = v;
}

// Each warp walks rows r = warp, warp + all warps, ...: writes gx (plus acc, and again in U when
// gx_low is set) and adds gy*xhat and gy into its own partial rows in shared memory
// (warp_sums[warp][0 | 1][cols]); a block then adds its warps' partials in warp order into
// partial[block][0 | 1][cols] (when `partial` is set).
template <typename T, typename G, typename U, typename W, int kVecs>
__global__ void __launch_bounds__(32 * kWarps, backward_blocks_per_sm(kVecs))
    backward_kernel(const G* __restrict__ gy, const T* __restrict__ x, const W* __restrict__ w,
                    const float* __restrict__ mean, const float* __restrict__ rstd_in, int64_t rows, int cols,
                    const T* __restrict__ acc, T* __restrict__ gx, U* __restrict__ gx_low,
                    float* __restrict__ partial) {
  extern __shared__ float4 shared_vectors[];  // [kWarps][2][cols] floats when partial is set
  float* const warp_sums = reinterpret_cast<float*>(shared_vectors);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  float* const dw_row = warp_sums + static_cast<int64_t>(warp) * 2 * cols;
  float* const db_row = dw_row + cols;
  if (partial)
    for (int j = lane; j < 2 * cols; j += 32) dw_row[j] = 0.0f;
  __syncwarp();
  const float n = static_cast<float>(cols);
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * kWarps + warp; r < rows;
       r += static_cast<int64_t>(gridDim.x) * kWarps) {
    const int64_t row = r * cols;
    const float mu = mean[r], rs = rstd_in[r];
    float g[kVecs][kVec], xh[kVecs][kVec];
    float a = 0, c2 = 0;
#pragma unroll
    for (int i = 0; i < kVecs; ++i) {
      const int c = column_of(i, lane);
      if (c >= cols) continue;
      float wv[kVec], gxh[kVec];
      load_vec(gy + row, c, g[i]);
      load_vec(x + row, c, xh[i]);
      if (w) load_vec(w, c, wv);
#pragma unroll
      for (int k = 0; k < kVec; ++k) {
        xh[i][k] = (xh[i][k] - mu) * rs;
        gxh[k] = g[i][k] * xh[i][k];
      }
      if (partial) {
        add_to_shared(dw_row + c, gxh);
        add_to_shared(db_row + c, g[i]);
      }
#pragma unroll
      for (int k = 0; k < kVec; ++k) {
        if (w) g[i][k] = __fmul_rn(g[i][k], wv[k]);
        a += g[i][k];
        c2 += g[i][k] * xh[i][k];
      }
    }
    const float mean_wg = warp_sum(a) / n;
    const float mean_wg_xhat = warp_sum(c2) / n;
#pragma unroll
    for (int i = 0; i < kVecs; ++i) {
      const int c = column_of(i, lane);
      if (c >= cols) continue;
      float o[kVec], more[kVec];
      if (acc) load_vec(acc + row, c, more);
#pragma unroll
      for (int k = 0; k < kVec; ++k) {
        o[k] = rs * (g[i][k] - mean_wg - xh[i][k] * mean_wg_xhat);
        // __fadd_rn: never contracted with the product above, so it rounds as the separate add does.
        if (acc) o[k] = round_to<T>(__fadd_rn(round_to<T>(o[k]), more[k]));
      }
      store_vec(gx + row, c, o);
      if (gx_low) store_vec(gx_low + row, c, o);
    }
  }
  if (!partial) return;
  __syncthreads();
  float* mine = partial + static_cast<int64_t>(blockIdx.x) * 2 * cols;
  for (int j = threadIdx.x; j < 2 * cols; j += blockDim.x) {
    float total = warp_sums[j];
    for (int k = 1; k < kWarps; ++k) total += warp_sums[static_cast<int64_t>(k) * 2 * cols + j];
    mine[j] = total;
  }
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

// Calls f.template operator()<kVecs>() with the fewest vectors per lane that hold a row.
template <typename F>
void with_vecs(int cols, F&& f) {
  const int vecs = (cols + 32 * kVec - 1) / (32 * kVec);
  if (vecs <= 2) return f.template operator()<2>();
  if (vecs <= 4) return f.template operator()<4>();
  if (vecs <= 6) return f.template operator()<6>();
  return f.template operator()<8>();
}

// Blocks of the forward: one warp per row.
inline unsigned row_blocks(int64_t rows) { return static_cast<unsigned>((rows + kWarps - 1) / kWarps); }

// Launches the backward kernel (one warp per row, at most as many blocks as the SMs hold at once,
// which then loop over the rows) and, when a parameter gradient is wanted, the finish pass that adds
// the blocks' partials.
template <typename T, typename G, typename U, typename W>
void launch_backward(const G* gy, const T* x, const W* w, const float* mean, const float* rstd, int64_t rows,
                     int cols, const T* acc, T* gx, U* gx_low, W* gw, W* gb, Device device, cudaStream_t stream) {
  const bool params = gw != nullptr || gb != nullptr;
  int sms = 0;
  TG_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device.index));
  const size_t shared = params ? size_t{kWarps} * 2 * cols * sizeof(float) : 0;  // up to 64 KiB
  Tensor partial;
  int64_t blocks = 0;
  with_vecs(cols, [&]<int kVecs>() {
    blocks = std::clamp<int64_t>((rows + kWarps - 1) / kWarps, 1, int64_t{sms} * backward_blocks_per_sm(kVecs));
    if (params) partial = empty({blocks * 2 * cols}, {.dtype = kFloat32, .device = device});
    auto* kernel = backward_kernel<T, G, U, W, kVecs>;
    if (shared > 48 * 1024)
      TG_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(shared)));
    kernel<<<static_cast<unsigned>(blocks), 32 * kWarps, shared, stream>>>(
        gy, x, w, mean, rstd, rows, cols, acc, gx, gx_low, params ? partial.data_ptr<float>() : nullptr);
  });
  TG_CUDA_CHECK_LAUNCH();
  if (!params) return;
  const ParamStore<W> store{gw, gb, cols};
  finish_column_sums<float><<<blocks_for(2 * cols, kSumColumns), dim3(kSumColumns, kFinishRows), 0, stream>>>(
      partial.data_ptr<float>(), blocks, 2 * int64_t{cols}, store);
  TG_CUDA_CHECK_LAUNCH();
}

}  // namespace tg::cuda::row_norm_kernels
