// The columns the elementwise family lists (ops/elementwise/unary_kinds.h, binary_kinds.h, compare_kinds.h)
// share: which dtypes a kind computes in and which parameters build its functor. The visitors
// (ops/elementwise/elementwise_select.h) and the fused-kernel generator read both from the lists.
#pragma once

#include <cstdint>

namespace tg {

// The dtypes a kind's functor is instantiated for, and what other inputs do.
enum class EwDomain : uint8_t {
  All,        // every dtype, bool included
  Numeric,    // every dtype but bool (bool input is an error)
  Floating,   // floating dtypes only (other input is an error)
  FloatLift,  // floating dtypes; integer and bool inputs compute in the default float, as in PyTorch
};

// Which EwParams fields a kind's functor is built from (ew::make_functor; the generator spells
// the same fields as constants).
enum class EwParamKind : uint8_t {
  None,      // Fn<T>{}
  Alpha,     // Fn<T>{alpha}
  Exponent,  // Fn<T>{exponent}
  Clamp,     // Fn<T>{lo, hi, has_lo, has_hi}
  Softplus,  // Fn<T>{beta, threshold} in the accumulation type
};

}  // namespace tg

// Counts the rows of a kind list: 0 TG_UNARY_KINDS(TG_KIND_COUNT) is the number of kinds.
#define TG_KIND_COUNT(...) +1
// The enumerator of a row (its first column).
#define TG_KIND_ENUMERATOR(K, ...) K,
