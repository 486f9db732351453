// The unary family, one row per kind. UnaryKind, the schemas, the dtype rules, what the gradient
// saves, the functor each backend launches and the name the fused-kernel generator calls are all
// generated from this list; adding a kind adds a row here, its functor (ops/elementwise/elementwise_math.h)
// and its gradient (ops/elementwise/unary.cpp).
#pragma once

#include <cstdint>
#include <iterator>

#include "ops/elementwise/kind_traits.h"

// X(Kind, "schema name", Functor, EwDomain, EwParamKind, UnarySaves)
#define TG_UNARY_KINDS(X)                                       \
  X(Neg, "neg", NegFn, Numeric, None, Nothing)                  \
  X(Abs, "abs", AbsFn, Numeric, None, Input)                    \
  X(Square, "square", SquareFn, Numeric, None, Input)           \
  X(Sgn, "sgn", SgnFn, All, None, Nothing)                      \
  X(Exp, "exp", ExpFn, FloatLift, None, Output)                 \
  X(Log, "log", LogFn, FloatLift, None, Input)                  \
  X(Sin, "sin", SinFn, FloatLift, None, Input)                  \
  X(Cos, "cos", CosFn, FloatLift, None, Input)                  \
  X(Erf, "erf", ErfFn, FloatLift, None, Input)                  \
  X(Tanh, "tanh", TanhFn, FloatLift, None, Output)              \
  X(Sigmoid, "sigmoid", SigmoidFn, FloatLift, None, Output)     \
  X(Relu, "relu", ReluFn, Numeric, None, Output)                \
  X(Gelu, "gelu", GeluFn, Floating, None, Input)                \
  X(GeluTanh, "gelu", GeluTanhFn, Floating, None, Input)        \
  X(Sqrt, "sqrt", SqrtFn, FloatLift, None, Output)              \
  X(Rsqrt, "rsqrt", RsqrtFn, FloatLift, None, Output)           \
  X(Trunc, "trunc", TruncFn, Numeric, None, Nothing)            \
  X(Pow, "pow", PowFn, Numeric, Exponent, Input)                \
  X(Clamp, "clamp", ClampFn, Numeric, Clamp, Input)             \
  X(Silu, "silu", SiluFn, Floating, None, Input)                \
  X(Softplus, "softplus", SoftplusFn, Floating, Softplus, Input)

namespace tg {

// One-operand functions.
enum class UnaryKind : uint8_t { TG_UNARY_KINDS(TG_KIND_ENUMERATOR) };
inline constexpr int kUnaryKinds = 0 TG_UNARY_KINDS(TG_KIND_COUNT);

// What a unary kind's gradient reads from the forward.
enum class UnarySaves : uint8_t { Nothing, Input, Output };

// A row of the list as data.
struct UnaryInfo {
  const char* name;     // schema name (also the dtype dispatch's error prefix)
  const char* functor;  // the functor template in ops/elementwise/elementwise_math.h
  EwDomain domain;
  EwParamKind params;
  UnarySaves saves;
};

#define TG_UNARY_INFO(K, NAME, FN, DOMAIN, PARAMS, SAVES) \
  UnaryInfo{NAME, #FN, EwDomain::DOMAIN, EwParamKind::PARAMS, UnarySaves::SAVES},
inline constexpr UnaryInfo kUnaryInfo[] = {TG_UNARY_KINDS(TG_UNARY_INFO)};
#undef TG_UNARY_INFO
static_assert(std::size(kUnaryInfo) == kUnaryKinds, "one UnaryInfo per UnaryKind");

// The row of kind k.
constexpr const UnaryInfo& unary_info(UnaryKind k) { return kUnaryInfo[static_cast<int>(k)]; }

}  // namespace tg
