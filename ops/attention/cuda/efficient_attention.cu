// Memory-efficient attention in float32 and float64 (FlashAttention-2's order of work, on CUDA cores):
// a block owns a tile of 16 R rows of one (batch, head) and walks the other side's tiles through
// shared memory, so nothing of size L x S exists anywhere.
//
// Threads form a 16 x 16 grid: thread (tx, ty) owns rows ty + 16 i and columns tx + 16 j (i, j < R)
// of each score tile, and columns tx + 16 j (j < kD / 16) of each output row it owns. The 16
// threads that share a row are one half-warp, so row maxima and sums are shuffles. Tiles hold kD
// columns (the head dims zero-padded), rows padded by one element against bank conflicts.
//
// Forward: the running maximum and sum of each row (online softmax), O = P V accumulated in
// registers. Backward: delta = rowsum(dO * O); one kernel per key tile accumulates dK and dV over the
// query tiles, one per query tile accumulates dQ over the key tiles (scores recomputed in both, no
// atomics, so results repeat bit for bit).
#include "ops/attention/efficient_attention_kernels.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "ops/core/cuda/lane_reduce.cuh"
#include "tensor/cuda/cuda_check.h"
#include "tensor/cuda/device_guard.h"

namespace tg::cuda {
namespace {

constexpr int kThreads = 256;

// A [B, H, T, D] operand with unit stride along D.
template <typename T>
struct Heads {
  T* data;
  int64_t sb, sh, st;
  __device__ T* row(int64_t b, int64_t h, int64_t t) const { return data + b * sb + h * sh + t * st; }
};

template <typename T>
Heads<T> heads_of(const Tensor& x) {
  TG_CHECK(x.dim() == 4 && x.stride(3) == 1, "[efficient_attention] internal error: expected a 4-D operand with a ",
           "unit last stride, got strides ", shape_str(x.strides()));
  return {static_cast<T*>(x.raw_data()), x.stride(0), x.stride(1), x.stride(2)};
}

// What every kernel reads: the operands and the problem's sizes.
template <typename T>
struct Problem {
  Heads<const T> q, k, v;
  int64_t heads, L, S, D, Dv;
  T scale;
  bool causal;

  // Whether query row `row` attends to key `key`.
  __device__ bool attends(int64_t row, int64_t key) const {
    return row < L && key < S && (!causal || key <= row);
  }
};

// Rows r0 .. r0 + kB - 1 of x(b, h) into dst [kB][kD + 1]: columns past `width` and rows past `rows`
// as zeros.
template <typename T, int kB, int kD>
__device__ void load_tile(T* dst, const Heads<const T>& x, int64_t b, int64_t h, int64_t r0, int64_t rows,
                          int64_t width) {
  for (int i = threadIdx.x; i < kB * kD; i += kThreads) {
    const int r = i / kD, c = i % kD;
    dst[r * (kD + 1) + c] = r0 + r < rows && c < width ? x.row(b, h, r0 + r)[c] : T(0);
  }
}

// Per-row values lse and delta of rows r0 .. r0 + kB - 1 (0 past L) into shared memory.
template <typename T, int kB>
__device__ void load_row_values(T* ls, T* ds, const T* lse, const T* delta, int64_t bh, int64_t r0, int64_t L) {
  for (int i = threadIdx.x; i < kB; i += kThreads) {
    const bool in = r0 + i < L;
    ls[i] = in ? lse[bh * L + r0 + i] : T(0);
    ds[i] = in ? delta[bh * L + r0 + i] : T(0);
  }
}

template <typename T, int kR, int kD>
struct Tiles {
  static constexpr int kB = 16 * kR;  // rows of a tile
  static constexpr int kP = kD + 1;   // pitch of an operand tile
  static constexpr int kS = kB + 1;   // pitch of a score tile
  static constexpr int kJ = kD / 16;  // output columns a thread owns
};

template <typename T, int kR, int kD>
__global__ void __launch_bounds__(kThreads) forward_kernel(Problem<T> p, Heads<T> o, T* lse) {
  using G = Tiles<T, kR, kD>;
  constexpr int kB = G::kB, kP = G::kP, kS = G::kS, kJ = G::kJ;
  constexpr T kNegInf = -std::numeric_limits<T>::infinity();
  extern __shared__ __align__(16) unsigned char smem[];
  T* qs = reinterpret_cast<T*>(smem);
  T* ks = qs + kB * kP;
  T* vs = ks + kB * kP;
  T* ps = vs + kB * kP;
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  const int64_t bh = blockIdx.x, b = bh / p.heads, h = bh % p.heads, q0 = int64_t{blockIdx.y} * kB;
  load_tile<T, kB, kD>(qs, p.q, b, h, q0, p.L, p.D);
  T m[kR], l[kR], acc[kR][kJ];
#pragma unroll
  for (int i = 0; i < kR; ++i) {
    m[i] = kNegInf;
    l[i] = T(0);
#pragma unroll
    for (int j = 0; j < kJ; ++j) acc[i][j] = T(0);
  }
  const int64_t key_end = p.causal ? std::min<int64_t>(p.S, q0 + kB) : p.S;
  for (int64_t k0 = 0; k0 < key_end; k0 += kB) {
    __syncthreads();  // the previous tile's keys, values and weights are read
    load_tile<T, kB, kD>(ks, p.k, b, h, k0, p.S, p.D);
    load_tile<T, kB, kD>(vs, p.v, b, h, k0, p.S, p.Dv);
    __syncthreads();
    T s[kR][kR] = {};
    for (int c = 0; c < kD; ++c) {
      T a[kR], e[kR];
#pragma unroll
      for (int i = 0; i < kR; ++i) a[i] = qs[(ty + 16 * i) * kP + c];
#pragma unroll
      for (int j = 0; j < kR; ++j) e[j] = ks[(tx + 16 * j) * kP + c];
#pragma unroll
      for (int i = 0; i < kR; ++i)
#pragma unroll
        for (int j = 0; j < kR; ++j) s[i][j] += a[i] * e[j];
    }
#pragma unroll
    for (int i = 0; i < kR; ++i) {
      const int64_t row = q0 + ty + 16 * i;
      T tile_max = kNegInf;
#pragma unroll
      for (int j = 0; j < kR; ++j) {
        s[i][j] = p.attends(row, k0 + tx + 16 * j) ? s[i][j] * p.scale : kNegInf;
        tile_max = max(tile_max, s[i][j]);
      }
      const T m_new = max(m[i], lanes_max<16>(tile_max));
      // A row with no key yet keeps m = -inf; its weights are exp(-inf) = 0.
      const T shift = m_new == kNegInf ? T(0) : m_new;
      const T rescale = exp(m[i] - shift);
      T sum = T(0);
#pragma unroll
      for (int j = 0; j < kR; ++j) {
        const T w = exp(s[i][j] - shift);
        ps[(ty + 16 * i) * kS + tx + 16 * j] = w;
        sum += w;
      }
      l[i] = l[i] * rescale + lanes_sum<16>(sum);
#pragma unroll
      for (int j = 0; j < kJ; ++j) acc[i][j] *= rescale;
      m[i] = m_new;
    }
    __syncthreads();
    for (int c = 0; c < kB; ++c) {
      T w[kR], x[kJ];
#pragma unroll
      for (int i = 0; i < kR; ++i) w[i] = ps[(ty + 16 * i) * kS + c];
#pragma unroll
      for (int j = 0; j < kJ; ++j) x[j] = vs[c * kP + tx + 16 * j];
#pragma unroll
      for (int i = 0; i < kR; ++i)
#pragma unroll
        for (int j = 0; j < kJ; ++j) acc[i][j] += w[i] * x[j];
    }
  }
#pragma unroll
  for (int i = 0; i < kR; ++i) {
    const int64_t row = q0 + ty + 16 * i;
    if (row >= p.L) continue;
    T* out = o.row(b, h, row);
    const T inv = l[i] > T(0) ? T(1) / l[i] : T(0);
#pragma unroll
    for (int j = 0; j < kJ; ++j)
      if (tx + 16 * j < p.Dv) out[tx + 16 * j] = acc[i][j] * inv;
    if (tx == 0) lse[bh * p.L + row] = l[i] > T(0) ? m[i] + log(l[i]) : kNegInf;
  }
}

// delta[row] = sum_d dout[row, d] * o[row, d]: a warp per row of [B * H * L].
template <typename T>
__global__ void delta_kernel(Heads<const T> o, Heads<const T> dout, T* delta, int64_t heads, int64_t L, int64_t Dv,
                             int64_t rows) {
  const int64_t row = (int64_t{blockIdx.x} * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;  // whole warps
  const int64_t t = row % L, bh = row / L, b = bh / heads, h = bh % heads;
  const T* a = o.row(b, h, t);
  const T* g = dout.row(b, h, t);
  T sum = T(0);
  for (int64_t d = lane; d < Dv; d += 32) sum += a[d] * g[d];
  sum = lanes_sum(sum);
  if (lane == 0) delta[row] = sum;
}

// dK and dV of one key tile: rows of the score tiles are keys, columns queries.
template <typename T, int kR, int kD>
__global__ void __launch_bounds__(kThreads)
    backward_kv_kernel(Problem<T> p, Heads<const T> dout, const T* lse, const T* delta, Heads<T> dk, Heads<T> dv) {
  using G = Tiles<T, kR, kD>;
  constexpr int kB = G::kB, kP = G::kP, kS = G::kS, kJ = G::kJ;
  extern __shared__ __align__(16) unsigned char smem[];
  T* ks = reinterpret_cast<T*>(smem);
  T* vs = ks + kB * kP;
  T* qs = vs + kB * kP;
  T* gs = qs + kB * kP;   // dO
  T* ps = gs + kB * kP;   // P^T
  T* dss = ps + kB * kS;  // dS^T
  T* ls = dss + kB * kS;
  T* dl = ls + kB;
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  const int64_t bh = blockIdx.x, b = bh / p.heads, h = bh % p.heads, k0 = int64_t{blockIdx.y} * kB;
  load_tile<T, kB, kD>(ks, p.k, b, h, k0, p.S, p.D);
  load_tile<T, kB, kD>(vs, p.v, b, h, k0, p.S, p.Dv);
  T dk_acc[kR][kJ] = {}, dv_acc[kR][kJ] = {};
  // Causal: the first query that sees key k0 is row k0.
  for (int64_t q0 = p.causal ? k0 : 0; q0 < p.L; q0 += kB) {
    __syncthreads();
    load_tile<T, kB, kD>(qs, p.q, b, h, q0, p.L, p.D);
    load_tile<T, kB, kD>(gs, dout, b, h, q0, p.L, p.Dv);
    load_row_values<T, kB>(ls, dl, lse, delta, bh, q0, p.L);
    __syncthreads();
    T s[kR][kR] = {}, dp[kR][kR] = {};
    for (int c = 0; c < kD; ++c) {
      T kk[kR], vv[kR], qq[kR], gg[kR];
#pragma unroll
      for (int i = 0; i < kR; ++i) {
        kk[i] = ks[(ty + 16 * i) * kP + c];
        vv[i] = vs[(ty + 16 * i) * kP + c];
      }
#pragma unroll
      for (int j = 0; j < kR; ++j) {
        qq[j] = qs[(tx + 16 * j) * kP + c];
        gg[j] = gs[(tx + 16 * j) * kP + c];
      }
#pragma unroll
      for (int i = 0; i < kR; ++i)
#pragma unroll
        for (int j = 0; j < kR; ++j) {
          s[i][j] += kk[i] * qq[j];
          dp[i][j] += vv[i] * gg[j];
        }
    }
#pragma unroll
    for (int i = 0; i < kR; ++i)
#pragma unroll
      for (int j = 0; j < kR; ++j) {
        const int qc = tx + 16 * j;
        const T w = p.attends(q0 + qc, k0 + ty + 16 * i) ? exp(s[i][j] * p.scale - ls[qc]) : T(0);
        ps[(ty + 16 * i) * kS + qc] = w;
        dss[(ty + 16 * i) * kS + qc] = w * (dp[i][j] - dl[qc]);
      }
    __syncthreads();
    for (int c = 0; c < kB; ++c) {
      T w[kR], d[kR], g[kJ], x[kJ];
#pragma unroll
      for (int i = 0; i < kR; ++i) {
        w[i] = ps[(ty + 16 * i) * kS + c];
        d[i] = dss[(ty + 16 * i) * kS + c];
      }
#pragma unroll
      for (int j = 0; j < kJ; ++j) {
        g[j] = gs[c * kP + tx + 16 * j];
        x[j] = qs[c * kP + tx + 16 * j];
      }
#pragma unroll
      for (int i = 0; i < kR; ++i)
#pragma unroll
        for (int j = 0; j < kJ; ++j) {
          dv_acc[i][j] += w[i] * g[j];
          dk_acc[i][j] += d[i] * x[j];
        }
    }
  }
#pragma unroll
  for (int i = 0; i < kR; ++i) {
    const int64_t key = k0 + ty + 16 * i;
    if (key >= p.S) continue;
    T* gk = dk.row(b, h, key);
    T* gv = dv.row(b, h, key);
#pragma unroll
    for (int j = 0; j < kJ; ++j) {
      const int c = tx + 16 * j;
      if (c < p.D) gk[c] = dk_acc[i][j] * p.scale;
      if (c < p.Dv) gv[c] = dv_acc[i][j];
    }
  }
}

// dQ of one query tile: rows of the score tiles are queries, columns keys.
template <typename T, int kR, int kD>
__global__ void __launch_bounds__(kThreads)
    backward_q_kernel(Problem<T> p, Heads<const T> dout, const T* lse, const T* delta, Heads<T> dq) {
  using G = Tiles<T, kR, kD>;
  constexpr int kB = G::kB, kP = G::kP, kS = G::kS, kJ = G::kJ;
  extern __shared__ __align__(16) unsigned char smem[];
  T* qs = reinterpret_cast<T*>(smem);
  T* gs = qs + kB * kP;  // dO
  T* ks = gs + kB * kP;
  T* vs = ks + kB * kP;
  T* dss = vs + kB * kP;  // dS
  T* ls = dss + kB * kS;
  T* dl = ls + kB;
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  const int64_t bh = blockIdx.x, b = bh / p.heads, h = bh % p.heads, q0 = int64_t{blockIdx.y} * kB;
  load_tile<T, kB, kD>(qs, p.q, b, h, q0, p.L, p.D);
  load_tile<T, kB, kD>(gs, dout, b, h, q0, p.L, p.Dv);
  load_row_values<T, kB>(ls, dl, lse, delta, bh, q0, p.L);
  T dq_acc[kR][kJ] = {};
  const int64_t key_end = p.causal ? std::min<int64_t>(p.S, q0 + kB) : p.S;
  for (int64_t k0 = 0; k0 < key_end; k0 += kB) {
    __syncthreads();
    load_tile<T, kB, kD>(ks, p.k, b, h, k0, p.S, p.D);
    load_tile<T, kB, kD>(vs, p.v, b, h, k0, p.S, p.Dv);
    __syncthreads();
    T s[kR][kR] = {}, dp[kR][kR] = {};
    for (int c = 0; c < kD; ++c) {
      T qq[kR], gg[kR], kk[kR], vv[kR];
#pragma unroll
      for (int i = 0; i < kR; ++i) {
        qq[i] = qs[(ty + 16 * i) * kP + c];
        gg[i] = gs[(ty + 16 * i) * kP + c];
      }
#pragma unroll
      for (int j = 0; j < kR; ++j) {
        kk[j] = ks[(tx + 16 * j) * kP + c];
        vv[j] = vs[(tx + 16 * j) * kP + c];
      }
#pragma unroll
      for (int i = 0; i < kR; ++i)
#pragma unroll
        for (int j = 0; j < kR; ++j) {
          s[i][j] += qq[i] * kk[j];
          dp[i][j] += gg[i] * vv[j];
        }
    }
#pragma unroll
    for (int i = 0; i < kR; ++i) {
      const int r = ty + 16 * i;
#pragma unroll
      for (int j = 0; j < kR; ++j) {
        const T w = p.attends(q0 + r, k0 + tx + 16 * j) ? exp(s[i][j] * p.scale - ls[r]) : T(0);
        dss[r * kS + tx + 16 * j] = w * (dp[i][j] - dl[r]);
      }
    }
    __syncthreads();
    for (int c = 0; c < kB; ++c) {
      T d[kR], x[kJ];
#pragma unroll
      for (int i = 0; i < kR; ++i) d[i] = dss[(ty + 16 * i) * kS + c];
#pragma unroll
      for (int j = 0; j < kJ; ++j) x[j] = ks[c * kP + tx + 16 * j];
#pragma unroll
      for (int i = 0; i < kR; ++i)
#pragma unroll
        for (int j = 0; j < kJ; ++j) dq_acc[i][j] += d[i] * x[j];
    }
  }
#pragma unroll
  for (int i = 0; i < kR; ++i) {
    const int64_t row = q0 + ty + 16 * i;
    if (row >= p.L) continue;
    T* g = dq.row(b, h, row);
#pragma unroll
    for (int j = 0; j < kJ; ++j)
      if (tx + 16 * j < p.D) g[tx + 16 * j] = dq_acc[i][j] * p.scale;
  }
}

// Rows per thread of a tile: 64-row tiles in float32, 32-row ones in float64 (shared memory).
template <typename T>
constexpr int rows_per_thread() {
  return sizeof(T) == 4 ? 4 : 2;
}

template <typename T>
Problem<T> problem_of(const Tensor& q, const Tensor& k, const Tensor& v, double scale, bool causal) {
  return {heads_of<const T>(q), heads_of<const T>(k), heads_of<const T>(v), q.size(1), q.size(2), k.size(2),
          q.size(3),           v.size(3),           static_cast<T>(scale), causal};
}

// Launches kernel on a grid of (B * H, tiles of `rows`), with `smem` bytes of shared memory.
template <typename Kernel, typename... Args>
void launch(Kernel kernel, int64_t bh, int64_t rows, int tile, size_t smem, Args... args) {
  const int64_t tiles = (rows + tile - 1) / tile;
  TG_CHECK(bh <= std::numeric_limits<int32_t>::max() && tiles <= 65535, "[efficient_attention] ", bh,
           " heads and ", tiles, " tiles of ", tile, " rows are more than one launch takes");
  TG_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
  kernel<<<dim3(static_cast<unsigned>(bh), static_cast<unsigned>(tiles)), kThreads, smem, current_stream()>>>(args...);
  TG_CUDA_CHECK_LAUNCH();
}

// Calls f.template operator()<T, kD>() for q's dtype and the smallest tile width that holds D and Dv.
template <typename F>
void dispatch_tiles(const Tensor& q, const Tensor& v, F&& f) {
  const int64_t width = std::max(q.size(3), v.size(3));
  TG_CHECK(width <= 128, "[efficient_attention] internal error: head dims up to 128, got ", width);
  auto with_width = [&]<typename T>() {
    if (width <= 64) f.template operator()<T, 64>();
    else f.template operator()<T, 128>();
  };
  if (q.dtype() == kFloat32) with_width.template operator()<float>();
  else if (q.dtype() == kFloat64) with_width.template operator()<double>();
  else TG_FAIL("[efficient_attention] internal error: float32 or float64 operands, got ", dtype_name(q.dtype()));
}

}  // namespace

void efficient_attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, double scale, bool causal,
                                 const Tensor& o, const Tensor& lse) {
  DeviceGuard guard(q.device().index);
  const int64_t bh = q.size(0) * q.size(1);
  dispatch_tiles(q, v, [&]<typename T, int kD>() {
    constexpr int kR = rows_per_thread<T>(), kB = 16 * kR;
    using G = Tiles<T, kR, kD>;
    const size_t smem = sizeof(T) * (3 * kB * G::kP + kB * G::kS);
    launch(forward_kernel<T, kR, kD>, bh, q.size(2), kB, smem, problem_of<T>(q, k, v, scale, causal), heads_of<T>(o),
           static_cast<T*>(lse.raw_data()));
  });
}

void efficient_attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o,
                                  const Tensor& dout, const Tensor& lse, double scale, bool causal, const Tensor& delta,
                                  const Tensor& dq, const Tensor& dk, const Tensor& dv) {
  DeviceGuard guard(q.device().index);
  const int64_t bh = q.size(0) * q.size(1), L = q.size(2);
  dispatch_tiles(q, v, [&]<typename T, int kD>() {
    constexpr int kR = rows_per_thread<T>(), kB = 16 * kR;
    using G = Tiles<T, kR, kD>;
    const Problem<T> p = problem_of<T>(q, k, v, scale, causal);
    const Heads<const T> g = heads_of<const T>(dout);
    T* d = static_cast<T*>(delta.raw_data());
    const T* l = static_cast<const T*>(lse.raw_data());
    const int64_t rows = bh * L;
    delta_kernel<T><<<blocks_for(rows * 32, kThreads), kThreads, 0, current_stream()>>>(
        heads_of<const T>(o), g, d, q.size(1), L, v.size(3), rows);
    TG_CUDA_CHECK_LAUNCH();
    const size_t kv_smem = sizeof(T) * (4 * kB * G::kP + 2 * kB * G::kS + 2 * kB);
    launch(backward_kv_kernel<T, kR, kD>, bh, k.size(2), kB, kv_smem, p, g, l, static_cast<const T*>(d),
           heads_of<T>(dk), heads_of<T>(dv));
    const size_t q_smem = sizeof(T) * (4 * kB * G::kP + kB * G::kS + 2 * kB);
    launch(backward_q_kernel<T, kR, kD>, bh, L, kB, q_smem, p, g, l, static_cast<const T*>(d), heads_of<T>(dq));
  });
}

}  // namespace tg::cuda
