// Picks the functor for an op kind and compute dtype, then hands it to a launcher: the CPU loop
// (ops/cpu/loops.h) or the CUDA launcher (ops/cuda/loops.cuh). Both backends include this one
// table, so an op's math is written once and selected identically on each device.
#pragma once

#include "ops/elementwise.h"
#include "ops/functors.h"

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

// Binary arithmetic at compute dtype `t` (the output dtype unless the op writes in place).
template <typename Launch>
void visit_binary(BinaryKind kind, DType t, const EwParams& p, Launch&& launch) {
  switch (kind) {
    case BinaryKind::Add:
      return TG_DISPATCH_ALL(t, "add", [&] { launch_bound(AddFn<scalar_t>{p.alpha.to<scalar_t>()}, p, launch); });
    case BinaryKind::Sub:
      return TG_DISPATCH_NUMERIC(t, "sub", [&] { launch_bound(SubFn<scalar_t>{p.alpha.to<scalar_t>()}, p, launch); });
    case BinaryKind::Mul:
      return TG_DISPATCH_ALL(t, "mul", [&] { launch_bound(MulFn<scalar_t>{}, p, launch); });
    case BinaryKind::Div:
      return TG_DISPATCH_FLOATING(t, "div", [&] { launch_bound(DivFn<scalar_t>{}, p, launch); });
    case BinaryKind::Maximum:
      return TG_DISPATCH_ALL(t, "maximum", [&] { launch_bound(MaximumFn<scalar_t>{}, p, launch); });
    case BinaryKind::Minimum:
      return TG_DISPATCH_ALL(t, "minimum", [&] { launch_bound(MinimumFn<scalar_t>{}, p, launch); });
    case BinaryKind::Pow:
      return TG_DISPATCH_NUMERIC(t, "pow", [&] { launch_bound(PowTensorFn<scalar_t>{}, p, launch); });
    case BinaryKind::TanhBackward:
      return TG_DISPATCH_FLOATING(t, "tanh_backward", [&] { launch_unbound(TanhBackwardFn<scalar_t>{}, p, launch); });
    case BinaryKind::SigmoidBackward:
      return TG_DISPATCH_FLOATING(t, "sigmoid_backward",
                                  [&] { launch_unbound(SigmoidBackwardFn<scalar_t>{}, p, launch); });
    case BinaryKind::ThresholdBackward:
      return TG_DISPATCH_FLOATING(t, "threshold_backward",
                                  [&] { launch_unbound(ThresholdBackwardFn<scalar_t>{}, p, launch); });
    case BinaryKind::GeluBackward:
      return TG_DISPATCH_FLOATING(t, "gelu_backward", [&] { launch_unbound(GeluBackwardFn<scalar_t>{}, p, launch); });
    case BinaryKind::GeluTanhBackward:
      return TG_DISPATCH_FLOATING(t, "gelu_backward",
                                  [&] { launch_unbound(GeluTanhBackwardFn<scalar_t>{}, p, launch); });
    case BinaryKind::SiluBackward:
      return TG_DISPATCH_FLOATING(t, "silu_backward", [&] { launch_unbound(SiluBackwardFn<scalar_t>{}, p, launch); });
  }
  TG_FAIL("[elementwise] unknown binary kind ", static_cast<int>(kind));
}

// Unary functions at compute dtype `t`.
template <typename Launch>
void visit_unary(UnaryKind kind, DType t, const EwParams& p, Launch&& launch) {
  switch (kind) {
    case UnaryKind::Neg: return TG_DISPATCH_NUMERIC(t, "neg", [&] { launch(NegFn<scalar_t>{}); });
    case UnaryKind::Abs: return TG_DISPATCH_NUMERIC(t, "abs", [&] { launch(AbsFn<scalar_t>{}); });
    case UnaryKind::Sgn: return TG_DISPATCH_ALL(t, "sgn", [&] { launch(SgnFn<scalar_t>{}); });
    case UnaryKind::Exp: return TG_DISPATCH_FLOATING(t, "exp", [&] { launch(ExpFn<scalar_t>{}); });
    case UnaryKind::Log: return TG_DISPATCH_FLOATING(t, "log", [&] { launch(LogFn<scalar_t>{}); });
    case UnaryKind::Sin: return TG_DISPATCH_FLOATING(t, "sin", [&] { launch(SinFn<scalar_t>{}); });
    case UnaryKind::Cos: return TG_DISPATCH_FLOATING(t, "cos", [&] { launch(CosFn<scalar_t>{}); });
    case UnaryKind::Tanh: return TG_DISPATCH_FLOATING(t, "tanh", [&] { launch(TanhFn<scalar_t>{}); });
    case UnaryKind::Sigmoid: return TG_DISPATCH_FLOATING(t, "sigmoid", [&] { launch(SigmoidFn<scalar_t>{}); });
    case UnaryKind::Relu: return TG_DISPATCH_NUMERIC(t, "relu", [&] { launch(ReluFn<scalar_t>{}); });
    case UnaryKind::Gelu: return TG_DISPATCH_FLOATING(t, "gelu", [&] { launch(GeluFn<scalar_t>{}); });
    case UnaryKind::GeluTanh: return TG_DISPATCH_FLOATING(t, "gelu", [&] { launch(GeluTanhFn<scalar_t>{}); });
    case UnaryKind::Sqrt: return TG_DISPATCH_FLOATING(t, "sqrt", [&] { launch(SqrtFn<scalar_t>{}); });
    case UnaryKind::Rsqrt: return TG_DISPATCH_FLOATING(t, "rsqrt", [&] { launch(RsqrtFn<scalar_t>{}); });
    case UnaryKind::Trunc: return TG_DISPATCH_NUMERIC(t, "trunc", [&] { launch(TruncFn<scalar_t>{}); });
    case UnaryKind::Pow:
      return TG_DISPATCH_NUMERIC(t, "pow", [&] { launch(PowFn<scalar_t>{p.exponent.to<scalar_t>()}); });
    case UnaryKind::Clamp:
      return TG_DISPATCH_NUMERIC(t, "clamp", [&] {
        launch(ClampFn<scalar_t>{p.lo ? p.lo->to<scalar_t>() : scalar_t(0), p.hi ? p.hi->to<scalar_t>() : scalar_t(0),
                                 p.lo.has_value(), p.hi.has_value()});
      });
    case UnaryKind::Silu: return TG_DISPATCH_FLOATING(t, "silu", [&] { launch(SiluFn<scalar_t>{}); });
    case UnaryKind::Softplus:
      return TG_DISPATCH_FLOATING(t, "softplus", [&] {
        using C = acc_type<scalar_t>;
        launch(SoftplusFn<scalar_t>{p.beta.to<C>(), p.threshold.to<C>()});
      });
  }
  TG_FAIL("[elementwise] unknown unary kind ", static_cast<int>(kind));
}

// Comparisons of operands promoted to `t`.
template <typename Launch>
void visit_compare(CompareKind kind, DType t, const EwParams& p, Launch&& launch) {
  switch (kind) {
    case CompareKind::Eq: return TG_DISPATCH_ALL(t, "eq", [&] { launch_bound(EqFn<scalar_t>{}, p, launch); });
    case CompareKind::Ne: return TG_DISPATCH_ALL(t, "ne", [&] { launch_bound(NeFn<scalar_t>{}, p, launch); });
    case CompareKind::Lt: return TG_DISPATCH_ALL(t, "lt", [&] { launch_bound(LtFn<scalar_t>{}, p, launch); });
    case CompareKind::Le: return TG_DISPATCH_ALL(t, "le", [&] { launch_bound(LeFn<scalar_t>{}, p, launch); });
    case CompareKind::Gt: return TG_DISPATCH_ALL(t, "gt", [&] { launch_bound(GtFn<scalar_t>{}, p, launch); });
    case CompareKind::Ge: return TG_DISPATCH_ALL(t, "ge", [&] { launch_bound(GeFn<scalar_t>{}, p, launch); });
  }
  TG_FAIL("[elementwise] unknown comparison kind ", static_cast<int>(kind));
}

// where(cond, a, b) with a and b promoted to `t`.
template <typename Launch>
void visit_where(DType t, Launch&& launch) {
  TG_DISPATCH_ALL(t, "where", [&] { launch(WhereFn<scalar_t>{}); });
}

// Element conversion from dtype `from` to dtype `to`.
template <typename Launch>
void visit_convert(DType to, DType from, Launch&& launch) {
  TG_DISPATCH_ALL(to, "copy_", [&] {
    using To = scalar_t;
    TG_DISPATCH_ALL(from, "copy_", [&] { launch(ConvertFn<To, scalar_t>{}); });
  });
}

// A constant of dtype `t`.
template <typename Launch>
void visit_fill(DType t, const Scalar& value, Launch&& launch) {
  TG_DISPATCH_ALL(t, "fill_", [&] { launch(FillFn<scalar_t>{value.to<scalar_t>()}); });
}

}  // namespace tg::ew
