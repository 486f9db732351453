// A host number of any dtype category, used for scalar operands and fill values.
#pragma once

#include <cstdint>
#include <type_traits>

#include "tensor/dtype.h"

namespace tg {

// A bool, integer or floating value that converts to any element type.
class Scalar {
 public:
  Scalar() = default;
  Scalar(bool v) : kind_(ScalarKind::Bool), i_(v), d_(v) {}  // NOLINT: implicit like PyTorch's Scalar
  template <typename T, std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>, int> = 0>
  Scalar(T v) : kind_(ScalarKind::Integral), i_(static_cast<int64_t>(v)), d_(static_cast<double>(v)) {}  // NOLINT
  template <typename T, std::enable_if_t<std::is_floating_point_v<T>, int> = 0>
  Scalar(T v) : kind_(ScalarKind::Floating), i_(static_cast<int64_t>(v)), d_(static_cast<double>(v)) {}  // NOLINT

  ScalarKind kind() const { return kind_; }
  bool is_floating() const { return kind_ == ScalarKind::Floating; }
  double to_double() const { return d_; }
  int64_t to_int() const { return i_; }
  // The value as element type T (integers keep full int64 precision).
  template <typename T>
  T to() const {
    if constexpr (is_floating_v<T>) return static_cast<T>(d_);
    else if constexpr (std::is_same_v<T, bool>) return kind_ == ScalarKind::Floating ? d_ != 0.0 : i_ != 0;
    else return kind_ == ScalarKind::Floating ? static_cast<T>(d_) : static_cast<T>(i_);
  }
  // The dtype a 0-dim tensor of this value would get (bool, int64, float32).
  DType default_dtype() const {
    return kind_ == ScalarKind::Bool ? kBool : kind_ == ScalarKind::Integral ? kInt64 : kDefaultFloat;
  }

 private:
  ScalarKind kind_ = ScalarKind::Integral;
  int64_t i_ = 0;
  double d_ = 0.0;
};

}  // namespace tg
