// Order keys for topk (and the sampling built on it), shared by the CPU loop and the CUDA kernels
// so that both devices pick the same elements in the same order.
//
// Each element maps to an unsigned integer whose ascending order is the order topk returns:
// the preferred element first (largest or smallest), NaN counted as larger than every number (as
// PyTorch's sort and topk do), -0.0 equal to +0.0, and equal keys kept in index order. Sorting
// (key, index) pairs ascending therefore gives a total, reproducible order on every device.
#pragma once

#include <cstdint>
#include <cstring>

#include "tensor/half.h"
#include "tensor/hd.h"

namespace tg {

// The unsigned type holding the order key of T (as wide as T).
template <typename T>
struct TopkKeyType;
template <>
struct TopkKeyType<float> { using type = uint32_t; };
template <>
struct TopkKeyType<double> { using type = uint64_t; };
template <>
struct TopkKeyType<Half> { using type = uint16_t; };
template <>
struct TopkKeyType<BFloat16> { using type = uint16_t; };
template <>
struct TopkKeyType<int32_t> { using type = uint32_t; };
template <>
struct TopkKeyType<int64_t> { using type = uint64_t; };

template <typename T>
using topk_key_t = typename TopkKeyType<T>::type;

namespace topk_detail {

// Sign-magnitude float bits -> unsigned bits increasing with the value; NaN -> all ones (largest).
template <typename U>
TG_HD U ordered_float_bits(U bits, bool is_nan) {
  constexpr U kSign = static_cast<U>(U{1} << (sizeof(U) * 8 - 1));
  if (is_nan) return static_cast<U>(~U{0});
  if ((bits & static_cast<U>(~kSign)) == 0) bits = 0;  // -0.0 sorts as +0.0
  return (bits & kSign) ? static_cast<U>(~bits) : static_cast<U>(bits | kSign);
}

}  // namespace topk_detail

// The key of v increasing with v (NaN largest).
TG_HD uint32_t ascending_key(float v) {
  uint32_t bits;
  memcpy(&bits, &v, sizeof bits);
  return topk_detail::ordered_float_bits<uint32_t>(bits, v != v);
}
TG_HD uint64_t ascending_key(double v) {
  uint64_t bits;
  memcpy(&bits, &v, sizeof bits);
  return topk_detail::ordered_float_bits<uint64_t>(bits, v != v);
}
TG_HD uint16_t ascending_key(Half v) {
  return topk_detail::ordered_float_bits<uint16_t>(v.bits, (v.bits & 0x7fffu) > 0x7c00u);
}
TG_HD uint16_t ascending_key(BFloat16 v) {
  return topk_detail::ordered_float_bits<uint16_t>(v.bits, (v.bits & 0x7fffu) > 0x7f80u);
}
TG_HD uint32_t ascending_key(int32_t v) { return static_cast<uint32_t>(v) ^ 0x80000000u; }
TG_HD uint64_t ascending_key(int64_t v) { return static_cast<uint64_t>(v) ^ 0x8000000000000000ull; }

// The key under which the element topk prefers comes first: ascending keys for the smallest,
// their complement for the largest.
template <typename T>
TG_HD topk_key_t<T> topk_rank_key(T v, bool largest) {
  const topk_key_t<T> k = ascending_key(v);
  return largest ? static_cast<topk_key_t<T>>(~k) : k;
}

}  // namespace tg
