// Combine rules shared by the CPU loops and the CUDA kernels of the reductions.
#pragma once

#include <cstdint>
#include <limits>
#include <type_traits>

#include "tensor/half.h"
#include "tensor/hd.h"

namespace tg {

// a + b.
struct SumCombine {
  template <typename T>
  TG_HD T operator()(T a, T b) const { return a + b; }
};

// The larger value; a NaN wins over anything (PyTorch's max propagates NaN).
struct MaxCombine {
  template <typename T>
  TG_HD T operator()(T a, T b) const {
    if constexpr (is_floating_v<T>) {
      if (a != a) return a;
      if (b != b) return b;
    }
    return a < b ? b : a;
  }
};

// The smaller value; a NaN wins over anything.
struct MinCombine {
  template <typename T>
  TG_HD T operator()(T a, T b) const {
    if constexpr (is_floating_v<T>) {
      if (a != a) return a;
      if (b != b) return b;
    }
    return b < a ? b : a;
  }
};

// A candidate maximum and where it was found (index over the reduced elements).
template <typename T>
struct IndexedValue {
  T value;
  int64_t index;
};

// Keeps the larger value, NaN as the largest; ties keep the smaller index (the first maximum).
struct ArgMaxCombine {
  template <typename T>
  TG_HD IndexedValue<T> operator()(IndexedValue<T> a, IndexedValue<T> b) const {
    bool take_b;
    if constexpr (is_floating_v<T>) {
      const bool a_nan = a.value != a.value;
      const bool b_nan = b.value != b.value;
      if (a_nan || b_nan) take_b = b_nan && (!a_nan || b.index < a.index);
      else take_b = b.value > a.value || (b.value == a.value && b.index < a.index);
    } else {
      take_b = b.value > a.value || (b.value == a.value && b.index < a.index);
    }
    return take_b ? b : a;
  }
};

// The identity of MaxCombine: -inf for floats, the lowest value otherwise.
template <typename T>
constexpr T max_identity() {
  if constexpr (is_floating_v<T>) return -std::numeric_limits<T>::infinity();
  else return std::numeric_limits<T>::lowest();
}

// The identity of MinCombine: +inf for floats, the highest value otherwise.
template <typename T>
constexpr T min_identity() {
  if constexpr (is_floating_v<T>) return std::numeric_limits<T>::infinity();
  else return std::numeric_limits<T>::max();
}

}  // namespace tg
