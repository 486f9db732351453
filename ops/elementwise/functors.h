// Elementwise functors shared by the CPU loops and the CUDA kernels: the formulas themselves
// (ops/elementwise/elementwise_math.h, also embedded in generated kernels) and the host-side machinery around
// them: call-operator introspection, dtype-erased loads and stores, host values bound to an operand.
#pragma once

#include <cstddef>
#include <cstdint>
#include <tuple>

#include "ops/elementwise/elementwise_math.h"
#include "tensor/dtype.h"
#include "tensor/half.h"
#include "tensor/hd.h"

namespace tg::ew {

// ---- functor introspection ----------------------------------------------------------------

// Result and argument types of a functor's (single, non-template) call operator.
template <typename F>
struct FnTraits : FnTraits<decltype(&F::operator())> {};
template <typename C, typename R, typename... A>
struct FnTraits<R (C::*)(A...) const> {
  using result = R;
  static constexpr int arity = sizeof...(A);
  template <size_t I>
  using arg = std::tuple_element_t<I, std::tuple<A...>>;
};

// ---- dtype-erased loads and stores (the mixed-dtype path) ---------------------------------

// Reads an element of dtype `d` at p, converted to T.
template <typename T>
TG_HD T load_as(const char* p, DType d) {
  switch (d) {
    case DType::Bool: return static_cast<T>(*reinterpret_cast<const bool*>(p));
    case DType::Int32: return static_cast<T>(*reinterpret_cast<const int32_t*>(p));
    case DType::Int64: return static_cast<T>(*reinterpret_cast<const int64_t*>(p));
    case DType::Float16: return static_cast<T>(*reinterpret_cast<const Half*>(p));
    case DType::BFloat16: return static_cast<T>(*reinterpret_cast<const BFloat16*>(p));
    case DType::Float32: return static_cast<T>(*reinterpret_cast<const float*>(p));
    case DType::Float64: return static_cast<T>(*reinterpret_cast<const double*>(p));
  }
  return T{};
}

// Writes v converted to dtype `d` at p.
template <typename T>
TG_HD void store_as(char* p, DType d, T v) {
  switch (d) {
    case DType::Bool: *reinterpret_cast<bool*>(p) = static_cast<bool>(v); return;
    case DType::Int32: *reinterpret_cast<int32_t*>(p) = static_cast<int32_t>(v); return;
    case DType::Int64: *reinterpret_cast<int64_t*>(p) = static_cast<int64_t>(v); return;
    case DType::Float16: *reinterpret_cast<Half*>(p) = static_cast<Half>(v); return;
    case DType::BFloat16: *reinterpret_cast<BFloat16*>(p) = static_cast<BFloat16>(v); return;
    case DType::Float32: *reinterpret_cast<float*>(p) = static_cast<float>(v); return;
    case DType::Float64: *reinterpret_cast<double*>(p) = static_cast<double>(v); return;
  }
}

// ---- functors whose launches are always typed -----------------------------------------------

// Functors dispatched on their operands' own dtypes (conversions, fills): every launch of theirs
// is typed, so neither backend instantiates its converting loop for them.
template <typename F>
inline constexpr bool kAlwaysTyped = false;
template <typename To, typename From>
inline constexpr bool kAlwaysTyped<ConvertFn<To, From>> = true;
template <typename T>
inline constexpr bool kAlwaysTyped<FillFn<T>> = true;

// A copy that moves elements unchanged (a conversion to its own dtype): strided launches of it may
// move whole vectors along a contiguous innermost dim (cat, narrow, transposed layouts).
template <typename F>
inline constexpr bool kPlainCopy = false;
template <typename T>
inline constexpr bool kPlainCopy<ConvertFn<T, T>> = true;

// ---- a host value bound to one operand of a binary functor ---------------------------------

template <typename F>
struct BindRight {
  using A = typename FnTraits<F>::template arg<0>;
  using B = typename FnTraits<F>::template arg<1>;
  F f;
  B b;
  TG_HD typename FnTraits<F>::result operator()(A a) const { return f(a, b); }
};
template <typename F>
struct BindLeft {
  using A = typename FnTraits<F>::template arg<0>;
  using B = typename FnTraits<F>::template arg<1>;
  F f;
  A a;
  TG_HD typename FnTraits<F>::result operator()(B b) const { return f(a, b); }
};

}  // namespace tg::ew
