// The binary family (arithmetic and the fused gradient kernels), one row per kind. BinaryKind,
// the schemas, the dtype rules, the functor each backend launches and the name the fused-kernel
// generator calls are all generated from this list.
#pragma once

#include <cstdint>
#include <iterator>

#include "ops/elementwise/kind_traits.h"

// X(Kind, "schema name", "in-place schema name" or "", Functor, EwDomain, EwParamKind, BinaryRole)
#define TG_BINARY_KINDS(X)                                                                             \
  X(Add, "add", "add_", AddFn, All, Alpha, Arithmetic)                                                 \
  X(Sub, "sub", "sub_", SubFn, Numeric, Alpha, Arithmetic)                                             \
  X(Mul, "mul", "mul_", MulFn, All, None, Arithmetic)                                                  \
  X(Div, "div", "div_", DivFn, FloatLift, None, Arithmetic)                                            \
  X(Maximum, "maximum", "", MaximumFn, All, None, Arithmetic)                                          \
  X(Minimum, "minimum", "", MinimumFn, All, None, Arithmetic)                                          \
  X(Pow, "pow", "", PowTensorFn, Numeric, None, Arithmetic)                                            \
  X(TanhBackward, "tanh_backward", "", TanhBackwardFn, Floating, None, FusedGradient)                  \
  X(SigmoidBackward, "sigmoid_backward", "", SigmoidBackwardFn, Floating, None, FusedGradient)         \
  X(ThresholdBackward, "threshold_backward", "", ThresholdBackwardFn, Floating, None, FusedGradient)   \
  X(GeluBackward, "gelu_backward", "", GeluBackwardFn, Floating, None, FusedGradient)                  \
  X(GeluTanhBackward, "gelu_backward", "", GeluTanhBackwardFn, Floating, None, FusedGradient)          \
  X(SiluBackward, "silu_backward", "", SiluBackwardFn, Floating, None, FusedGradient)

namespace tg {

// Two-operand arithmetic (and the fused gradients, which are binary too).
enum class BinaryKind : uint8_t { TG_BINARY_KINDS(TG_KIND_ENUMERATOR) };
inline constexpr int kBinaryKinds = 0 TG_BINARY_KINDS(TG_KIND_COUNT);

// Arithmetic takes a host scalar on either side; a fused gradient (grad, value) always sees two
// tensors on one device, so callers stage host values first.
enum class BinaryRole : uint8_t { Arithmetic, FusedGradient };

// A row of the list as data.
struct BinaryInfo {
  const char* name;          // schema name (also the dtype dispatch's error prefix)
  const char* inplace_name;  // the in-place form's schema name, "" where there is none
  const char* functor;       // the functor template in ops/elementwise/elementwise_math.h
  EwDomain domain;
  EwParamKind params;
  BinaryRole role;
};

#define TG_BINARY_INFO(K, NAME, INPLACE, FN, DOMAIN, PARAMS, ROLE) \
  BinaryInfo{NAME, INPLACE, #FN, EwDomain::DOMAIN, EwParamKind::PARAMS, BinaryRole::ROLE},
inline constexpr BinaryInfo kBinaryInfo[] = {TG_BINARY_KINDS(TG_BINARY_INFO)};
#undef TG_BINARY_INFO
static_assert(std::size(kBinaryInfo) == kBinaryKinds, "one BinaryInfo per BinaryKind");

// The row of kind k.
constexpr const BinaryInfo& binary_info(BinaryKind k) { return kBinaryInfo[static_cast<int>(k)]; }
// True for tanh_backward and the other (grad, value) kernels.
constexpr bool is_fused_gradient(BinaryKind k) { return binary_info(k).role == BinaryRole::FusedGradient; }

}  // namespace tg
