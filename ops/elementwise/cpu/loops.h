// The CPU elementwise loop: runs a functor over a TensorIter. One flat typed loop when every
// operand is dense (the compiler vectorizes it, for AVX2 or AVX-512 where the CPU has them), typed
// strided rows otherwise, and a converting path (loads and stores through the operands' own
// dtypes) when operand dtypes differ from the functor's types, as in int32 + float64 or an
// in-place write into a narrower dtype.
#pragma once

#include <algorithm>
#include <array>
#include <tuple>
#include <utility>

#include "ops/core/cpu/vector_isa.h"
#include "ops/elementwise/cpu/span_math.h"
#include "ops/elementwise/elementwise.h"
#include "ops/elementwise/functors.h"

namespace tg::cpu {

namespace detail {

template <typename F, size_t I>
using Arg = typename ew::FnTraits<F>::template arg<I>;
template <typename F>
using Res = typename ew::FnTraits<F>::result;

// True when every operand holds exactly the C++ type the functor reads or writes for it.
template <typename F, size_t... I>
bool typed_operands(const TensorIter& it, std::index_sequence<I...>) {
  return it.operand_is(0, dtype_of<Res<F>>()) && (it.operand_is(static_cast<int>(I) + 1, dtype_of<Arg<F, I>>()) && ...);
}

// The flat loop over dense operands; inlined into each instruction-set variant below.
template <typename F, size_t... I>
TG_CPU_ALWAYS_INLINE inline void dense_loop(char* const* data, int64_t n, const F& f, std::index_sequence<I...>) {
  Res<F>* out = reinterpret_cast<Res<F>*>(data[0]);
  const std::tuple<const Arg<F, I>*...> in{reinterpret_cast<const Arg<F, I>*>(data[I + 1])...};
  for (int64_t i = 0; i < n; ++i) out[i] = f(std::get<I>(in)[i]...);
}

#if TG_CPU_ISA_VARIANTS
// The same loop compiled for AVX2 and for AVX-512, chosen at run time (the build itself targets
// the baseline x86-64, so it runs anywhere).
template <typename F, size_t... I>
__attribute__((target("avx2,fma"))) void dense_loop_avx2(char* const* data, int64_t n, const F& f,
                                                         std::index_sequence<I...> seq) {
  dense_loop(data, n, f, seq);
}
template <typename F, size_t... I>
__attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,avx2,fma"))) void dense_loop_avx512(
    char* const* data, int64_t n, const F& f, std::index_sequence<I...> seq) {
  dense_loop(data, n, f, seq);
}
#endif

// True when a functor reads or writes floating-point values: only those loops get the AVX2 and
// AVX-512 variants. Integer and bool loops run the baseline loop alone (vectorized as -O3 makes
// it), which keeps what the CPU units compile to about half.
template <typename F, size_t... I>
constexpr bool has_wide_variants(std::index_sequence<I...>) {
  return is_floating_v<Res<F>> || (is_floating_v<Arg<F, I>> || ...);
}

template <typename F, size_t... I>
void dense_run(char* const* data, int64_t n, const F& f, std::index_sequence<I...> seq) {
  // Functors whose scalar form calls libm run their span on Eigen's vectorized math instead.
  if constexpr (SpanKernel<F>::kAvailable) return SpanKernel<F>::run(data, n);
#if TG_CPU_ISA_VARIANTS
  if constexpr (has_wide_variants<F>(seq)) {
    switch (vector_isa()) {
      case VectorIsa::Avx512: return dense_loop_avx512(data, n, f, seq);
      case VectorIsa::Avx2: return dense_loop_avx2(data, n, f, seq);
      case VectorIsa::Baseline: break;
    }
  }
#endif
  dense_loop(data, n, f, seq);
}

template <typename F, size_t... I>
void strided_run(char* const* data, const int64_t* s, int64_t n, const F& f, std::index_sequence<I...>) {
  for (int64_t i = 0; i < n; ++i) {
    *reinterpret_cast<Res<F>*>(data[0] + i * s[0]) =
        f(*reinterpret_cast<const Arg<F, I>*>(data[I + 1] + i * s[I + 1])...);
  }
}

// Elements per chunk of the converting path.
inline constexpr int64_t kConvertChunk = 256;

// dst[k] = element k of the span at p (dtype d, s bytes apart) converted to T, as ew::load_as
// converts it. Shared by every functor reading a T, unlike a loop with the conversion inside.
template <typename T>
[[gnu::noinline]] void load_span(const char* p, int64_t s, DType d, int64_t n, T* dst) {
  TG_DISPATCH_ALL(d, "elementwise", [&] {
    for (int64_t k = 0; k < n; ++k) dst[k] = static_cast<T>(*reinterpret_cast<const scalar_t*>(p + k * s));
  });
}

// Element k of the span at p (dtype d, s bytes apart) = src[k] converted as ew::store_as converts it.
template <typename T>
[[gnu::noinline]] void store_span(const T* src, int64_t n, char* p, int64_t s, DType d) {
  TG_DISPATCH_ALL(d, "elementwise", [&] {
    for (int64_t k = 0; k < n; ++k) *reinterpret_cast<scalar_t*>(p + k * s) = static_cast<scalar_t>(src[k]);
  });
}

// The mixed-dtype path, a chunk at a time: each operand's chunk converted into a typed buffer,
// the functor's typed strided loop over the buffers, the results converted into the output. Every
// element goes through the same conversions and the same call of f as element by element (never
// the span kernels), so the values are those of a per-element loop. The conversion loops are
// shared by every functor of a file: a conversion switch inside each functor's loop took most of
// the CPU units' compile time.
template <typename F, size_t... I>
void converting_run(char* const* data, const int64_t* s, const DType* dt, int64_t n, const F& f,
                    std::index_sequence<I...> seq) {
  std::tuple<std::array<Arg<F, I>, kConvertChunk>...> in;
  std::array<Res<F>, kConvertChunk> out;
  char* const buffers[] = {reinterpret_cast<char*>(out.data()), reinterpret_cast<char*>(std::get<I>(in).data())...};
  const int64_t strides[] = {static_cast<int64_t>(sizeof(Res<F>)), static_cast<int64_t>(sizeof(Arg<F, I>))...};
  for (int64_t lo = 0; lo < n; lo += kConvertChunk) {
    const int64_t m = std::min(kConvertChunk, n - lo);
    (load_span(data[I + 1] + lo * s[I + 1], s[I + 1], dt[I + 1], m, std::get<I>(in).data()), ...);
    strided_run(buffers, strides, m, f, seq);
    store_span(out.data(), m, data[0] + lo * s[0], s[0], dt[0]);
  }
}

// Calls row(ptrs, inner_strides, n) for each run of the innermost dim, odometer-style.
template <typename Row>
void for_each_row(const TensorIter& it, const Row& row) {
  char* ptrs[kMaxIterOperands];
  int64_t inner[kMaxIterOperands];
  for (int k = 0; k < it.nops; ++k) {
    ptrs[k] = it.data[k];
    inner[k] = it.strides[k][0];
  }
  const int64_t n = it.sizes[0];
  const int64_t rows = it.numel / n;
  int64_t counter[kMaxIterDims] = {};
  for (int64_t r = 0; r < rows; ++r) {
    row(ptrs, inner, n);
    for (int d = 1; d < it.ndim; ++d) {
      for (int k = 0; k < it.nops; ++k) ptrs[k] += it.strides[k][d];
      if (++counter[d] < it.sizes[d]) break;
      for (int k = 0; k < it.nops; ++k) ptrs[k] -= it.strides[k][d] * it.sizes[d];
      counter[d] = 0;
    }
  }
}

template <typename F, size_t... I>
bool dense_row(const int64_t* s, std::index_sequence<I...>) {
  return s[0] == static_cast<int64_t>(sizeof(Res<F>)) &&
         ((s[I + 1] == static_cast<int64_t>(sizeof(Arg<F, I>))) && ...);
}

}  // namespace detail

// Runs out = f(inputs...) over every element of `it` (operand k+1 feeds argument k).
template <typename F>
void cpu_kernel(const TensorIter& it, const F& f) {
  constexpr int arity = ew::FnTraits<F>::arity;
  using Seq = std::make_index_sequence<arity>;
  TG_CHECK(it.nops == arity + 1, "[elementwise] kernel takes ", arity, " inputs, launch has ", it.nops - 1);
  if (it.numel == 0) return;
  if (detail::typed_operands<F>(it, Seq{})) {
    if (it.is_contiguous()) {
      detail::dense_run(it.data, it.numel, f, Seq{});
      return;
    }
    detail::for_each_row(it, [&](char* const* p, const int64_t* s, int64_t n) {
      if (detail::dense_row<F>(s, Seq{})) {
        detail::dense_run(p, n, f, Seq{});
      } else {
        detail::strided_run(p, s, n, f, Seq{});
      }
    });
    return;
  }
  if constexpr (ew::kAlwaysTyped<F>) {
    TG_FAIL("[elementwise] internal error: a conversion or fill launched on operands of other dtypes");
  } else {
    detail::for_each_row(it, [&](char* const* p, const int64_t* s, int64_t n) {
      detail::converting_run(p, s, it.dtypes, n, f, Seq{});
    });
  }
}

// The launcher the functor tables in ops/elementwise/elementwise_select.h call on the CPU.
struct Launch {
  const TensorIter& it;
  template <typename F>
  void operator()(const F& f) const {
    cpu_kernel(it, f);
  }
};

}  // namespace tg::cpu
