// The CUDA elementwise launcher: runs a TG_HD functor over a TensorIter on the current stream.
// Three kernels: a vectorized one (16-byte loads/stores, grid-stride) for dense operands of the
// functor's own types, a strided one (an offset calculator over the coalesced dims) for
// broadcast/transposed/sliced operands, and a converting strided one for mixed dtypes.
#pragma once

#include <cuda/std/tuple>

#include <algorithm>
#include <cstdint>
#include <utility>

#include "ops/elementwise/elementwise.h"
#include "ops/elementwise/functors.h"
#include "tensor/cuda/cuda_check.h"

namespace tg::cuda {

namespace ew_detail {

template <typename F, size_t I>
using Arg = typename ew::FnTraits<F>::template arg<I>;
template <typename F>
using Res = typename ew::FnTraits<F>::result;

inline constexpr int kThreads = 256;

// VEC elements of T loaded or stored as one aligned access.
template <typename T, int VEC>
struct alignas(sizeof(T) * VEC) Pack {
  T v[VEC];
};

struct Pointers {
  char* p[kMaxIterOperands];
};
struct DTypes {
  DType d[kMaxIterOperands];
};

// Byte offsets of every operand for a linear index, dims innermost first.
template <int NOPS, typename index_t>
struct OffsetCalc {
  int ndim;
  index_t sizes[kMaxIterDims];
  index_t strides[kMaxIterDims][NOPS];

  __device__ __forceinline__ void get(index_t linear, index_t (&off)[NOPS]) const {
#pragma unroll
    for (int k = 0; k < NOPS; ++k) off[k] = 0;
    for (int d = 0; d < ndim; ++d) {
      const index_t size = sizes[d];
      const index_t idx = linear % size;
      linear /= size;
#pragma unroll
      for (int k = 0; k < NOPS; ++k) off[k] += idx * strides[d][k];
    }
  }
};

// Elements per 16-byte access of the widest operand type.
template <typename F, size_t... I>
constexpr int vec_width(std::index_sequence<I...>) {
  constexpr size_t widest = std::max({sizeof(Res<F>), sizeof(Arg<F, I>)...});
  return static_cast<int>(16 / widest);
}

template <int VEC, typename F, size_t... I>
__global__ void vectorized_kernel(int64_t n, F f, Pointers data, std::index_sequence<I...>) {
  using R = Res<F>;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t nvec = n / VEC;
  auto* out = reinterpret_cast<Pack<R, VEC>*>(data.p[0]);
  for (int64_t v = first; v < nvec; v += step) {
    ::cuda::std::tuple<Pack<Arg<F, I>, VEC>...> in{reinterpret_cast<const Pack<Arg<F, I>, VEC>*>(data.p[I + 1])[v]...};
    Pack<R, VEC> r;
#pragma unroll
    for (int j = 0; j < VEC; ++j) r.v[j] = f(::cuda::std::get<I>(in).v[j]...);
    out[v] = r;
  }
  for (int64_t i = nvec * VEC + first; i < n; i += step) {
    reinterpret_cast<R*>(data.p[0])[i] = f(reinterpret_cast<const Arg<F, I>*>(data.p[I + 1])[i]...);
  }
}

template <bool kConvert, int NOPS, typename index_t, typename F, size_t... I>
__global__ void strided_kernel(index_t n, F f, Pointers data, DTypes dt, OffsetCalc<NOPS, index_t> calc,
                               std::index_sequence<I...>) {
  using R = Res<F>;
  const index_t step = static_cast<index_t>(gridDim.x) * blockDim.x;
  for (index_t i = static_cast<index_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    index_t off[NOPS];
    calc.get(i, off);
    if constexpr (kConvert) {
      ew::store_as<R>(data.p[0] + off[0], dt.d[0], f(ew::load_as<Arg<F, I>>(data.p[I + 1] + off[I + 1], dt.d[I + 1])...));
    } else {
      *reinterpret_cast<R*>(data.p[0] + off[0]) = f(*reinterpret_cast<const Arg<F, I>*>(data.p[I + 1] + off[I + 1])...);
    }
  }
}

// Waves of resident blocks a grid-stride launch may span. Measured on an H200 (64M-float add):
// one wave reached 4.05 TB/s, four 4.2, one block per 256 elements 4.34; many short-lived blocks
// keep more loads in flight than few long-running ones, so the cap only bounds huge launches.
inline constexpr int kMaxWaves = 64;

// Blocks for a grid-stride kernel: enough to cover `work` items, at most kMaxWaves waves.
template <auto Kernel>
unsigned grid_for(int64_t work) {
  static const int64_t max_blocks = [] {
    int device = 0, sms = 0, per_sm = 0;
    TG_CUDA_CHECK(cudaGetDevice(&device));
    TG_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    TG_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, Kernel, kThreads, 0));
    return int64_t{std::max(1, sms * std::max(1, per_sm))} * kMaxWaves;
  }();
  const int64_t needed = (work + kThreads - 1) / kThreads;
  return static_cast<unsigned>(std::clamp<int64_t>(needed, 1, max_blocks));
}

inline bool aligned(const void* p, size_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

template <typename F, size_t... I>
bool typed_operands(const TensorIter& it, std::index_sequence<I...>) {
  return it.operand_is(0, dtype_of<Res<F>>()) && (it.operand_is(static_cast<int>(I) + 1, dtype_of<Arg<F, I>>()) && ...);
}

template <typename F, size_t... I>
bool vector_aligned(const TensorIter& it, int vec, std::index_sequence<I...>) {
  return aligned(it.data[0], sizeof(Res<F>) * vec) && (aligned(it.data[I + 1], sizeof(Arg<F, I>) * vec) && ...);
}

template <int VEC, typename F, size_t... I>
void launch_vectorized(const TensorIter& it, const F& f, Pointers ptrs, std::index_sequence<I...> seq) {
  constexpr auto kernel = &vectorized_kernel<VEC, F, I...>;
  const unsigned grid = grid_for<kernel>(std::max<int64_t>(it.numel / VEC, 1));
  kernel<<<grid, kThreads, 0, current_stream()>>>(it.numel, f, ptrs, seq);
  TG_CUDA_CHECK_LAUNCH();
}

template <bool kConvert, typename index_t, typename F, size_t... I>
void launch_strided(const TensorIter& it, const F& f, Pointers ptrs, std::index_sequence<I...> seq) {
  constexpr int NOPS = sizeof...(I) + 1;
  OffsetCalc<NOPS, index_t> calc;
  calc.ndim = it.ndim;
  for (int d = 0; d < it.ndim; ++d) {
    calc.sizes[d] = static_cast<index_t>(it.sizes[d]);
    for (int k = 0; k < NOPS; ++k) calc.strides[d][k] = static_cast<index_t>(it.strides[k][d]);
  }
  DTypes dt;
  for (int k = 0; k < NOPS; ++k) dt.d[k] = it.dtypes[k];
  constexpr auto kernel = &strided_kernel<kConvert, NOPS, index_t, F, I...>;
  const unsigned grid = grid_for<kernel>(it.numel);
  kernel<<<grid, kThreads, 0, current_stream()>>>(static_cast<index_t>(it.numel), f, ptrs, dt, calc, seq);
  TG_CUDA_CHECK_LAUNCH();
}

// True when every linear index and byte offset of the launch fits in 32 bits.
inline bool fits_int32(const TensorIter& it) {
  if (it.numel > INT32_MAX) return false;
  for (int k = 0; k < it.nops; ++k) {
    int64_t extent = 0;
    for (int d = 0; d < it.ndim; ++d) extent += (it.sizes[d] - 1) * it.strides[k][d];
    if (extent > INT32_MAX) return false;
  }
  return true;
}

}  // namespace ew_detail

// Runs out = f(inputs...) over every element of `it` (operand k+1 feeds argument k) on the current stream.
template <typename F>
void gpu_kernel(const TensorIter& it, const F& f) {
  using namespace ew_detail;
  constexpr int arity = ew::FnTraits<F>::arity;
  using Seq = std::make_index_sequence<arity>;
  TG_CHECK(it.nops == arity + 1, "[elementwise] kernel takes ", arity, " inputs, launch has ", it.nops - 1);
  if (it.numel == 0) return;
  Pointers ptrs{};
  for (int k = 0; k < it.nops; ++k) ptrs.p[k] = it.data[k];
  const bool typed = typed_operands<F>(it, Seq{});
  if (typed && it.is_contiguous()) {
    constexpr int kVec = vec_width<F>(Seq{});
    if constexpr (kVec > 1) {
      if (vector_aligned<F>(it, kVec, Seq{})) {
        launch_vectorized<kVec>(it, f, ptrs, Seq{});
        return;
      }
    }
    launch_vectorized<1>(it, f, ptrs, Seq{});
    return;
  }
  const bool small = fits_int32(it);
  if (typed) {
    if (small) {
      launch_strided<false, uint32_t>(it, f, ptrs, Seq{});
    } else {
      launch_strided<false, int64_t>(it, f, ptrs, Seq{});
    }
  } else if (small) {
    launch_strided<true, uint32_t>(it, f, ptrs, Seq{});
  } else {
    launch_strided<true, int64_t>(it, f, ptrs, Seq{});
  }
}

// The launcher the functor tables in ops/elementwise/elementwise_select.h call on CUDA.
struct Launch {
  const TensorIter& it;
  template <typename F>
  void operator()(const F& f) const {
    gpu_kernel(it, f);
  }
};

}  // namespace tg::cuda
