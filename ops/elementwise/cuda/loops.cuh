// The CUDA elementwise launcher: runs a TG_HD functor over a TensorIter on the current stream.
// Three kernels per functor (and, for plain copies, a strided one that moves vectors along a
// contiguous innermost dim): a vectorized one (16-byte loads/stores, grid-stride, 64-bit indices) for
// dense aligned operands of the functor's own types, a strided one (an offset calculator over the
// coalesced dims) for broadcast/transposed/sliced/misaligned operands, and a converting strided one
// for mixed dtypes. The strided ones index with 32 bits: a launch whose offsets do not fit is cut
// into parts that do. A host value bound to one argument of a binary functor (x + 2, 2 < x) is a kernel
// parameter of the same kernels (ScalarArgs), not a functor of its own: tensor-tensor,
// tensor-scalar and scalar-tensor launches share one set of kernels.
#pragma once

#include <cuda/std/tuple>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <utility>

#include "ops/core/cuda/aligned_vector.cuh"
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
using Pack = AlignedVector<T, VEC>;

struct Pointers {
  char* p[kMaxIterOperands];
};
struct DTypes {
  DType d[kMaxIterOperands];
};

// Host values that stand in for arguments of a binary functor: bit I of `mask` set means argument I
// is the same value for every element. Functors of other arities take none.
template <typename F, int N = ew::FnTraits<F>::arity>
struct ScalarArgs {
  static constexpr uint32_t mask = 0;
};
template <typename F>
struct ScalarArgs<F, 2> {
  uint32_t mask = 0;
  Arg<F, 0> a{};
  Arg<F, 1> b{};
};

// True when argument I is a host value in this launch.
template <size_t I, typename F>
__host__ __device__ __forceinline__ bool is_scalar(const ScalarArgs<F>& s) {
  return (s.mask >> I) & 1u;
}

// The host value of argument I (only read when is_scalar<I>).
template <size_t I, typename F>
__device__ __forceinline__ Arg<F, I> scalar_value(const ScalarArgs<F>& s) {
  if constexpr (ew::FnTraits<F>::arity == 2) {
    if constexpr (I == 0) {
      return s.a;
    } else {
      return s.b;
    }
  } else {
    return Arg<F, I>{};
  }
}

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

// VEC consecutive elements of argument I: loaded as one access, or the host value repeated.
template <int VEC, size_t I, typename F>
__device__ __forceinline__ Pack<Arg<F, I>, VEC> load_pack(const Pointers& data, int64_t v, const ScalarArgs<F>& s) {
  Pack<Arg<F, I>, VEC> pack;
  if (is_scalar<I>(s)) {
#pragma unroll
    for (int j = 0; j < VEC; ++j) pack.v[j] = scalar_value<I>(s);
  } else {
    pack = reinterpret_cast<const Pack<Arg<F, I>, VEC>*>(data.p[I + 1])[v];
  }
  return pack;
}

template <int VEC, typename F, size_t... I>
__global__ void vectorized_kernel(int64_t n, F f, Pointers data, ScalarArgs<F> s, std::index_sequence<I...>) {
  using R = Res<F>;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t nvec = n / VEC;
  auto* out = reinterpret_cast<Pack<R, VEC>*>(data.p[0]);
  for (int64_t v = first; v < nvec; v += step) {
    ::cuda::std::tuple<Pack<Arg<F, I>, VEC>...> in{load_pack<VEC, I, F>(data, v, s)...};
    Pack<R, VEC> r;
#pragma unroll
    for (int j = 0; j < VEC; ++j) r.v[j] = f(::cuda::std::get<I>(in).v[j]...);
    out[v] = r;
  }
  for (int64_t i = nvec * VEC + first; i < n; i += step) {
    reinterpret_cast<R*>(data.p[0])[i] = f(load_pack<1, I, F>(data, i, s).v[0]...);
  }
}

// Argument I at byte offset `off` of its operand, in the operand's own dtype when kConvert.
template <bool kConvert, size_t I, typename F>
__device__ __forceinline__ Arg<F, I> load_arg(const Pointers& data, const DTypes& dt, int64_t off,
                                              const ScalarArgs<F>& s) {
  if (is_scalar<I>(s)) return scalar_value<I>(s);
  const char* p = data.p[I + 1] + off;
  if constexpr (kConvert) {
    return ew::load_as<Arg<F, I>>(p, dt.d[I + 1]);
  } else {
    return *reinterpret_cast<const Arg<F, I>*>(p);
  }
}

template <bool kConvert, int NOPS, typename index_t, typename F, size_t... I>
__global__ void strided_kernel(index_t n, F f, Pointers data, DTypes dt, OffsetCalc<NOPS, index_t> calc,
                               ScalarArgs<F> s, std::index_sequence<I...>) {
  using R = Res<F>;
  const index_t step = static_cast<index_t>(gridDim.x) * blockDim.x;
  for (index_t i = static_cast<index_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    index_t off[NOPS];
    calc.get(i, off);
    const R r = f(load_arg<kConvert, I, F>(data, dt, off[I + 1], s)...);
    if constexpr (kConvert) {
      ew::store_as<R>(data.p[0] + off[0], dt.d[0], r);
    } else {
      *reinterpret_cast<R*>(data.p[0] + off[0]) = r;
    }
  }
}

// A plain copy over strided operands whose innermost dim is contiguous: each step moves one
// aligned vector of VEC elements (calc's innermost dim counts vectors).
template <int VEC, typename T>
__global__ void strided_vector_copy_kernel(uint32_t n, Pointers data, OffsetCalc<2, uint32_t> calc) {
  const uint32_t step = gridDim.x * blockDim.x;
  for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) {
    uint32_t off[2];
    calc.get(i, off);
    *reinterpret_cast<Pack<T, VEC>*>(data.p[0] + off[0]) = *reinterpret_cast<const Pack<T, VEC>*>(data.p[1] + off[1]);
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

// One launch's operands as the functor sees them: the output, then one per argument. An argument
// bound to a host value has no data, no strides and the argument's own dtype. Holds its own copy of
// the geometry, so that a launch too large for 32-bit offsets can be cut into parts.
struct Operands {
  int ndim = 0;
  int nops = 0;
  int64_t numel = 0;
  int64_t sizes[kMaxIterDims] = {};
  int64_t strides[kMaxIterOperands][kMaxIterDims] = {};
  Pointers ptrs{};
  DTypes dtypes{};
};

template <typename F, size_t... I>
Operands operands_of(const TensorIter& it, const ScalarArgs<F>& s, std::index_sequence<I...>) {
  Operands ops;
  ops.ndim = it.ndim;
  ops.nops = static_cast<int>(sizeof...(I)) + 1;
  ops.numel = it.numel;
  std::copy(it.sizes, it.sizes + it.ndim, ops.sizes);
  int k = 0;
  auto take = [&](int slot, bool scalar, DType own) {
    if (scalar) {
      ops.dtypes.d[slot] = own;
      return;
    }
    ops.ptrs.p[slot] = it.data[k];
    std::copy(it.strides[k], it.strides[k] + it.ndim, ops.strides[slot]);
    ops.dtypes.d[slot] = it.dtypes[k];
    ++k;
  };
  take(0, false, it.dtypes[0]);
  (take(static_cast<int>(I) + 1, is_scalar<I>(s), dtype_of<Arg<F, I>>()), ...);
  return ops;
}

// The largest byte offset operand k reaches along dim d.
inline int64_t extent(const Operands& ops, int k, int d) { return (ops.sizes[d] - 1) * std::abs(ops.strides[k][d]); }

// True when every linear index and byte offset of the launch fits in 32 bits.
inline bool fits_int32(const Operands& ops) {
  if (ops.numel > INT32_MAX) return false;
  for (int k = 0; k < ops.nops; ++k) {
    int64_t reach = 0;
    for (int d = 0; d < ops.ndim; ++d) reach += extent(ops, k, d);
    if (reach > INT32_MAX) return false;
  }
  return true;
}

// Calls run(part) for parts of `ops` whose offsets fit in 32 bits, as PyTorch's TensorIterator
// does (with_32bit_indexing): the dim with the farthest reach is halved until each part fits, so
// every strided kernel indexes with 32-bit integers and none is instantiated with 64-bit ones.
template <typename Run>
void for_each_32bit_part(const Operands& ops, const Run& run) {
  if (fits_int32(ops)) {
    run(ops);
    return;
  }
  int split = 0;
  int64_t farthest = -1;
  for (int d = 0; d < ops.ndim; ++d) {
    for (int k = 0; k < ops.nops; ++k) {
      if (ops.sizes[d] > 1 && extent(ops, k, d) > farthest) {
        farthest = extent(ops, k, d);
        split = d;
      }
    }
    if (ops.sizes[d] > 1 && farthest < 0) split = d;  // numel alone is too large: any dim will do
  }
  const int64_t size = ops.sizes[split], head = size / 2;
  Operands first = ops, second = ops;
  first.sizes[split] = head;
  second.sizes[split] = size - head;
  first.numel = ops.numel / size * head;
  second.numel = ops.numel - first.numel;
  for (int k = 0; k < ops.nops; ++k) {
    if (ops.ptrs.p[k] != nullptr) second.ptrs.p[k] += head * ops.strides[k][split];
  }
  for_each_32bit_part(first, run);
  for_each_32bit_part(second, run);
}

template <typename F, size_t... I>
bool typed_operands(const Operands& ops, std::index_sequence<I...>) {
  return ops.dtypes.d[0] == dtype_of<Res<F>>() && ((ops.dtypes.d[I + 1] == dtype_of<Arg<F, I>>()) && ...);
}

template <typename F, size_t... I>
bool vector_aligned(const Operands& ops, int vec, std::index_sequence<I...>) {
  return aligned(ops.ptrs.p[0], sizeof(Res<F>) * vec) && (aligned(ops.ptrs.p[I + 1], sizeof(Arg<F, I>) * vec) && ...);
}

template <int VEC, typename F, size_t... I>
void launch_vectorized(const Operands& ops, const F& f, const ScalarArgs<F>& s, std::index_sequence<I...> seq) {
  constexpr auto kernel = &vectorized_kernel<VEC, F, I...>;
  const unsigned grid = grid_for<kernel>(std::max<int64_t>(ops.numel / VEC, 1));
  kernel<<<grid, kThreads, 0, current_stream()>>>(ops.numel, f, ops.ptrs, s, seq);
  TG_CUDA_CHECK_LAUNCH();
}

template <bool kConvert, typename F, size_t... I>
void launch_strided(const Operands& ops, const F& f, const ScalarArgs<F>& s, std::index_sequence<I...> seq) {
  constexpr int NOPS = sizeof...(I) + 1;
  OffsetCalc<NOPS, uint32_t> calc;
  calc.ndim = ops.ndim;
  for (int d = 0; d < ops.ndim; ++d) {
    calc.sizes[d] = static_cast<uint32_t>(ops.sizes[d]);
    for (int k = 0; k < NOPS; ++k) calc.strides[d][k] = static_cast<uint32_t>(ops.strides[k][d]);
  }
  constexpr auto kernel = &strided_kernel<kConvert, NOPS, uint32_t, F, I...>;
  const unsigned grid = grid_for<kernel>(ops.numel);
  kernel<<<grid, kThreads, 0, current_stream()>>>(static_cast<uint32_t>(ops.numel), f, ops.ptrs, ops.dtypes, calc, s,
                                                  seq);
  TG_CUDA_CHECK_LAUNCH();
}

// True when both operands of a copy are contiguous along the innermost dim and every vector of VEC
// elements of T along it starts aligned (pointers and outer strides).
template <typename T>
bool inner_vectors(const Operands& ops, int vec) {
  if (ops.ndim == 0 || ops.sizes[0] % vec != 0) return false;
  const auto bytes = static_cast<int64_t>(sizeof(T)) * vec;
  for (int k = 0; k < 2; ++k) {
    if (ops.strides[k][0] != static_cast<int64_t>(sizeof(T)) || !aligned(ops.ptrs.p[k], static_cast<size_t>(bytes)))
      return false;
    for (int d = 1; d < ops.ndim; ++d)
      if (ops.strides[k][d] % bytes != 0) return false;
  }
  return true;
}

// A strided plain copy moving 16-, 8- or 4-byte vectors where the layout allows; false otherwise.
template <typename T>
bool launch_strided_vector_copy(const Operands& ops) {
  auto launch = [&]<int VEC>() {
    OffsetCalc<2, uint32_t> calc;
    calc.ndim = ops.ndim;
    for (int d = 0; d < ops.ndim; ++d) {
      calc.sizes[d] = static_cast<uint32_t>(d == 0 ? ops.sizes[0] / VEC : ops.sizes[d]);
      for (int k = 0; k < 2; ++k)
        calc.strides[d][k] = static_cast<uint32_t>(d == 0 ? ops.strides[k][0] * VEC : ops.strides[k][d]);
    }
    constexpr auto kernel = &strided_vector_copy_kernel<VEC, T>;
    const int64_t n = ops.numel / VEC;
    kernel<<<grid_for<kernel>(n), kThreads, 0, current_stream()>>>(static_cast<uint32_t>(n), ops.ptrs, calc);
    TG_CUDA_CHECK_LAUNCH();
  };
  constexpr int kWide = static_cast<int>(16 / sizeof(T));
  if constexpr (kWide >= 2) {
    if (inner_vectors<T>(ops, kWide)) {
      launch.template operator()<kWide>();
      return true;
    }
  }
  if constexpr (kWide >= 4) {
    if (inner_vectors<T>(ops, kWide / 2)) {
      launch.template operator()<kWide / 2>();
      return true;
    }
  }
  return false;
}

// Runs out = f(args...) over `it`, whose operands after the output feed the arguments that `s`
// does not bind to host values, in order.
template <typename F>
void run(const TensorIter& it, const F& f, const ScalarArgs<F>& s) {
  constexpr int arity = ew::FnTraits<F>::arity;
  using Seq = std::make_index_sequence<arity>;
  const int bound = __builtin_popcount(s.mask);
  TG_CHECK(it.nops == arity + 1 - bound, "[elementwise] kernel takes ", arity - bound, " tensor inputs, launch has ",
           it.nops - 1);
  if (it.numel == 0) return;
  const Operands ops = operands_of<F>(it, s, Seq{});
  const bool typed = typed_operands<F>(ops, Seq{});
  constexpr int kVec = vec_width<F>(Seq{});
  if (typed && it.is_contiguous() && vector_aligned<F>(ops, kVec, Seq{})) {
    launch_vectorized<kVec>(ops, f, s, Seq{});
    return;
  }
  for_each_32bit_part(ops, [&](const Operands& part) {
    if constexpr (ew::kPlainCopy<F>) {
      if (launch_strided_vector_copy<Res<F>>(part)) return;
    }
    if (typed) {
      launch_strided<false>(part, f, s, Seq{});
    } else if constexpr (!ew::kAlwaysTyped<F>) {
      launch_strided<true>(part, f, s, Seq{});
    } else {
      TG_FAIL("[elementwise] internal error: a conversion or fill launched on operands of other dtypes");
    }
  });
}

}  // namespace ew_detail

// Runs out = f(inputs...) over every element of `it` (operand k+1 feeds argument k) on the current stream.
template <typename F>
void gpu_kernel(const TensorIter& it, const F& f) {
  ew_detail::run(it, f, ew_detail::ScalarArgs<F>{});
}

// The launcher the functor tables in ops/elementwise/elementwise_select.h call on CUDA. A functor
// with a host value bound to one argument launches the unbound functor's kernels with that value
// as a parameter.
struct Launch {
  const TensorIter& it;
  template <typename F>
  void operator()(const F& f) const {
    gpu_kernel(it, f);
  }
  template <typename F>
  void operator()(const ew::BindRight<F>& bound) const {
    ew_detail::ScalarArgs<F> s;
    s.mask = 2u;
    s.b = bound.b;
    ew_detail::run(it, bound.f, s);
  }
  template <typename F>
  void operator()(const ew::BindLeft<F>& bound) const {
    ew_detail::ScalarArgs<F> s;
    s.mask = 1u;
    s.a = bound.a;
    ew_detail::run(it, bound.f, s);
  }
};

}  // namespace tg::cuda
