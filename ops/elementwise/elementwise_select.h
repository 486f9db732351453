// Picks the functor for an op kind and compute dtype, then hands it to a launcher: the CPU loop
// (ops/elementwise/cpu/loops.h) or the CUDA launcher (ops/elementwise/cuda/loops.cuh). Both backends include this one
// table, so an op's math is written once and selected identically on each device.
#pragma once

#include "ops/core/dispatch_groups.h"
#include "ops/elementwise/elementwise.h"
#include "ops/elementwise/functors.h"
#include "ops/elementwise/kernel_units.h"

namespace tg::ew {

// Launches f, or f with p.scalar bound to the operand named by p.side.
template <typename F, typename Launch>
void launch_bound(const F& f, const EwParams& p, Launch& launch) {
  using A = typename FnTraits<F>::template arg<0>;
  using B = typename FnTraits<F>::template arg<1>;
  switch (p.side) {
    case ScalarSide::None: launch(f); return;
    case ScalarSide::Right: launch(BindRight<F>{f, p.scalar.to<B>()}); return;
    case ScalarSide::Left: launch(BindLeft<F>{f, p.scalar.to<A>()}); return;
  }
}

// Fused gradients always see two tensors on one device (callers stage host values first).
template <typename F, typename Launch>
void launch_unbound(const F& f, const EwParams& p, Launch& launch) {
  TG_CHECK(p.side == ScalarSide::None, "[elementwise] a fused gradient kernel got a host scalar operand");
  launch(f);
}

// The dtype dispatch of each EwDomain (a kind list's domain column pasted onto TG_EW_DISPATCH_).
#define TG_EW_DISPATCH_All TG_DISPATCH_ALL
#define TG_EW_DISPATCH_Numeric TG_DISPATCH_NUMERIC
#define TG_EW_DISPATCH_Floating TG_DISPATCH_FLOATING
#define TG_EW_DISPATCH_FloatLift TG_DISPATCH_FLOATING

// Functor Fn<T> built from the EwParams fields its kind's list row names.
template <template <typename> class Fn, EwParamKind P, typename T>
Fn<T> make_functor(const EwParams& p) {
  if constexpr (P == EwParamKind::None) {
    return Fn<T>{};
  } else if constexpr (P == EwParamKind::Alpha) {
    return Fn<T>{p.alpha.to<T>()};
  } else if constexpr (P == EwParamKind::Exponent) {
    return Fn<T>{p.exponent.to<T>()};
  } else if constexpr (P == EwParamKind::Clamp) {
    return Fn<T>{p.lo ? p.lo->to<T>() : T(0), p.hi ? p.hi->to<T>() : T(0), p.lo.has_value(), p.hi.has_value()};
  } else {
    static_assert(P == EwParamKind::Softplus);
    using C = acc_type<T>;
    return Fn<T>{p.beta.to<C>(), p.threshold.to<C>()};
  }
}

// Launches a binary kind's functor: arithmetic may have a host scalar bound, fused gradients not.
template <BinaryKind K, typename F, typename Launch>
void launch_binary_functor(const F& f, const EwParams& p, Launch& launch) {
  if constexpr (is_fused_gradient(K)) {
    launch_unbound(f, p, launch);
  } else {
    launch_bound(f, p, launch);
  }
}

// The visitors below instantiate the functors of the kinds their filter `Keep` keeps (every kind by
// default; one unit's kinds in the per-unit files of ops/elementwise/kernel_units.h) and fail on others.

// Binary arithmetic at compute dtype `t` (the output dtype unless the op writes in place).
template <typename Keep = EveryKind, typename Launch>
void visit_binary(BinaryKind kind, DType t, const EwParams& p, Launch&& launch) {
  switch (kind) {
#define TG_EW_CASE(K, NAME, INPLACE, FN, DOMAIN, PARAMS, ROLE)                                       \
  case BinaryKind::K:                                                                               \
    if constexpr (Keep::template keep<BinaryKind::K>) {                                             \
      return TG_EW_DISPATCH_##DOMAIN(t, NAME, [&] {                                                 \
        launch_binary_functor<BinaryKind::K>(make_functor<FN, EwParamKind::PARAMS, scalar_t>(p), p, launch); \
      });                                                                                           \
    }                                                                                               \
    break;
    TG_BINARY_KINDS(TG_EW_CASE)
#undef TG_EW_CASE
  }
  TG_FAIL("[elementwise] binary kind ", static_cast<int>(kind), " is not instantiated here");
}

// Unary functions at compute dtype `t`.
template <typename Keep = EveryKind, typename Launch>
void visit_unary(UnaryKind kind, DType t, const EwParams& p, Launch&& launch) {
  switch (kind) {
#define TG_EW_CASE(K, NAME, FN, DOMAIN, PARAMS, SAVES)                                                      \
  case UnaryKind::K:                                                                                       \
    if constexpr (Keep::template keep<UnaryKind::K>) {                                                     \
      return TG_EW_DISPATCH_##DOMAIN(t, NAME, [&] { launch(make_functor<FN, EwParamKind::PARAMS, scalar_t>(p)); }); \
    }                                                                                                      \
    break;
    TG_UNARY_KINDS(TG_EW_CASE)
#undef TG_EW_CASE
  }
  TG_FAIL("[elementwise] unary kind ", static_cast<int>(kind), " is not instantiated here");
}

// Comparisons of operands promoted to `t`. gt and ge have no functors here: callers launch them
// as lt and le of the swapped operands (runs_mirrored).
template <typename Keep = EveryKind, typename Launch>
void visit_compare(CompareKind kind, DType t, const EwParams& p, Launch&& launch) {
  switch (kind) {
#define TG_EW_CASE(K, NAME, FN)                                                                \
  case CompareKind::K:                                                                        \
    if constexpr (Keep::template keep<CompareKind::K> && !runs_mirrored(CompareKind::K)) {    \
      return TG_DISPATCH_ALL(t, NAME, [&] { launch_bound(FN<scalar_t>{}, p, launch); });      \
    }                                                                                         \
    break;
    TG_COMPARE_KINDS(TG_EW_CASE)
#undef TG_EW_CASE
  }
  TG_FAIL("[elementwise] comparison kind ", static_cast<int>(kind), " is not instantiated here");
}

// where(cond, a, b) with a and b promoted to `t`.
template <typename Launch>
void visit_where(DType t, Launch&& launch) {
  TG_DISPATCH_ALL(t, "where", [&] { launch(WhereFn<scalar_t>{}); });
}

// Element conversion from dtype `from` to dtype `to`, where `to` is floating (kIntoFloating) or
// bool or an integer: the backends instantiate the two halves of the 7x7 table in two files.
template <bool kIntoFloating, typename Launch>
void visit_convert(DType to, DType from, Launch&& launch) {
  const auto from_any = [&]<typename To>() {
    TG_DISPATCH_ALL(from, "copy_", [&] { launch(ConvertFn<To, scalar_t>{}); });
  };
  if constexpr (kIntoFloating) {
    TG_DISPATCH_FLOATING(to, "copy_", [&] { from_any.template operator()<scalar_t>(); });
  } else {
    TG_DISPATCH_EXACT(to, "copy_", [&] { from_any.template operator()<scalar_t>(); });
  }
}

// A constant of dtype `t`.
template <typename Launch>
void visit_fill(DType t, const Scalar& value, Launch&& launch) {
  TG_DISPATCH_ALL(t, "fill_", [&] { launch(FillFn<scalar_t>{value.to<scalar_t>()}); });
}

}  // namespace tg::ew
