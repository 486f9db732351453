// How the kernels of the elementwise families are spread over source files. Every (kind, dtype)
// pair instantiates several kernels on each backend, and one file per family took up to two
// minutes to compile, so each family is cut into units of a few kinds: each unit's kinds are
// instantiated in one file per backend (ew::visit_* with the unit's KindsOf filter; a CUDA file may
// hold two small units, which share the time its headers take), and the backend's launcher routes
// a kind to its unit with for_unit.
#pragma once

#include <cstdint>
#include <type_traits>

#include "ops/elementwise/binary_kinds.h"
#include "ops/elementwise/compare_kinds.h"
#include "ops/elementwise/unary_kinds.h"

namespace tg {

// add, sub, mul, div | maximum, minimum, pow | the fused gradients.
enum class BinaryUnit : uint8_t { Arithmetic, Extrema, Gradients };
// Sign, magnitude and piecewise-linear kinds | pow and clamp, which take scalar parameters |
// exponentials, logarithms, trigonometry, roots | the smooth activations.
enum class UnaryUnit : uint8_t { Basic, Parametric, Transcendental, Activation };
// eq, ne | lt, le, gt, ge.
enum class CompareUnit : uint8_t { Equality, Order };

// The unit of each kind.
constexpr BinaryUnit unit_of(BinaryKind k) {
  switch (k) {
    case BinaryKind::Add: case BinaryKind::Sub: case BinaryKind::Mul: case BinaryKind::Div:
      return BinaryUnit::Arithmetic;
    case BinaryKind::Maximum: case BinaryKind::Minimum: case BinaryKind::Pow:
      return BinaryUnit::Extrema;
    default:
      return BinaryUnit::Gradients;
  }
}
constexpr UnaryUnit unit_of(UnaryKind k) {
  switch (k) {
    case UnaryKind::Exp: case UnaryKind::Log: case UnaryKind::Sin: case UnaryKind::Cos: case UnaryKind::Erf:
    case UnaryKind::Sqrt: case UnaryKind::Rsqrt:
      return UnaryUnit::Transcendental;
    case UnaryKind::Tanh: case UnaryKind::Sigmoid: case UnaryKind::Gelu: case UnaryKind::GeluTanh:
    case UnaryKind::Silu: case UnaryKind::Softplus:
      return UnaryUnit::Activation;
    case UnaryKind::Pow: case UnaryKind::Clamp:
      return UnaryUnit::Parametric;
    default:
      return UnaryUnit::Basic;
  }
}
constexpr CompareUnit unit_of(CompareKind k) {
  return k == CompareKind::Eq || k == CompareKind::Ne ? CompareUnit::Equality : CompareUnit::Order;
}

namespace ew {

// A visitor filter that keeps every kind (one file instantiates the whole family).
struct EveryKind {
  template <auto K>
  static constexpr bool keep = true;
};
// A visitor filter that keeps the kinds of unit U.
template <auto U>
struct KindsOf {
  template <auto K>
  static constexpr bool keep = unit_of(K) == U;
};

}  // namespace ew

// A unit as a compile-time value: what for_unit hands its function.
template <auto U>
using UnitTag = std::integral_constant<decltype(U), U>;

// Calls fn(UnitTag<unit of kind>{}), so that a launcher names the unit's function as a template
// argument: for_unit(kind, [&](auto u) { launch_unit<decltype(u)::value>(...); }).
template <typename Fn>
void for_unit(BinaryKind kind, Fn&& fn) {
  switch (unit_of(kind)) {
    case BinaryUnit::Arithmetic: return fn(UnitTag<BinaryUnit::Arithmetic>{});
    case BinaryUnit::Extrema: return fn(UnitTag<BinaryUnit::Extrema>{});
    case BinaryUnit::Gradients: return fn(UnitTag<BinaryUnit::Gradients>{});
  }
}
template <typename Fn>
void for_unit(UnaryKind kind, Fn&& fn) {
  switch (unit_of(kind)) {
    case UnaryUnit::Basic: return fn(UnitTag<UnaryUnit::Basic>{});
    case UnaryUnit::Parametric: return fn(UnitTag<UnaryUnit::Parametric>{});
    case UnaryUnit::Transcendental: return fn(UnitTag<UnaryUnit::Transcendental>{});
    case UnaryUnit::Activation: return fn(UnitTag<UnaryUnit::Activation>{});
  }
}
template <typename Fn>
void for_unit(CompareKind kind, Fn&& fn) {
  switch (unit_of(kind)) {
    case CompareUnit::Equality: return fn(UnitTag<CompareUnit::Equality>{});
    case CompareUnit::Order: return fn(UnitTag<CompareUnit::Order>{});
  }
}

}  // namespace tg
