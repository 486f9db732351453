// See Note [CPU collectives] in docs/data_parallel.md.
#include "distributed/collectives/gloo/reductions.h"

#include <cstring>
#include <type_traits>

#include "tensor/check.h"
#include "tensor/half.h"

namespace tg::distributed {
namespace {

template <typename T>
void sum_into(void* out, const void* a, const void* b, size_t n) {
  auto* o = static_cast<T*>(out);
  const auto* x = static_cast<const T*>(a);
  const auto* y = static_cast<const T*>(b);
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;  // wraps around like NCCL's sums, without undefined behaviour
    for (size_t i = 0; i < n; ++i) o[i] = static_cast<T>(static_cast<U>(x[i]) + static_cast<U>(y[i]));
  } else {
    for (size_t i = 0; i < n; ++i) o[i] = x[i] + y[i];
  }
}

template <typename T>
void max_into(void* out, const void* a, const void* b, size_t n) {
  auto* o = static_cast<T*>(out);
  const auto* x = static_cast<const T*>(a);
  const auto* y = static_cast<const T*>(b);
  // NaN wins, as in torch.maximum (x != x is false for integers).
  for (size_t i = 0; i < n; ++i) o[i] = (x[i] != x[i] || x[i] >= y[i]) ? x[i] : y[i];
}

void or_into(void* out, const void* a, const void* b, size_t n) {
  auto* o = static_cast<uint8_t*>(out);
  const auto* x = static_cast<const uint8_t*>(a);
  const auto* y = static_cast<const uint8_t*>(b);
  for (size_t i = 0; i < n; ++i) o[i] = static_cast<uint8_t>(x[i] | y[i]);
}

template <typename T>
ReduceFunction typed(ReduceOp op) {
  if (op == ReduceOp::Max) return max_into<T>;
  return sum_into<T>;  // sum, and avg before its division
}

}  // namespace

DType wire_dtype(DType t) { return is_low_precision(t) ? DType::Float32 : t; }

ReduceFunction reduce_function(DType wire, ReduceOp op) {
  TG_CHECK(op != ReduceOp::Avg || is_floating(wire), "[distributed] avg needs a floating dtype, got ",
           dtype_name(wire));
  switch (wire) {
    case DType::Float32: return typed<float>(op);
    case DType::Float64: return typed<double>(op);
    case DType::Int32: return typed<int32_t>(op);
    case DType::Int64: return typed<int64_t>(op);
    case DType::Bool: return or_into;
    default: break;
  }
  TG_FAIL("[distributed] cannot reduce ", dtype_name(wire), " data: expected a wire dtype (float32, float64, int32, "
          "int64 or bool)");
}

void to_wire(DType t, const void* src, void* dst, int64_t n) {
  if (n <= 0) return;
  if (!is_low_precision(t)) {
    if (src != dst) std::memcpy(dst, src, static_cast<size_t>(n * dtype_size(t)));
    return;
  }
  const auto* bits = static_cast<const uint16_t*>(src);
  auto* out = static_cast<float*>(dst);
  if (t == DType::Float16)
    for (int64_t i = 0; i < n; ++i) out[i] = half_bits::half_to_float(bits[i]);
  else
    for (int64_t i = 0; i < n; ++i) out[i] = half_bits::bfloat16_to_float(bits[i]);
}

void finish_reduction(DType t, ReduceOp op, int world, void* acc, void* out, int64_t n) {
  if (n <= 0) return;
  const DType wire = wire_dtype(t);
  if (op == ReduceOp::Avg) {
    TG_CHECK(is_floating(t), "[distributed] avg needs a floating dtype, got ", dtype_name(t));
    if (wire == DType::Float64)
      for (int64_t i = 0; i < n; ++i) static_cast<double*>(acc)[i] /= world;
    else
      for (int64_t i = 0; i < n; ++i) static_cast<float*>(acc)[i] /= static_cast<float>(world);
  }
  if (wire == t) {
    if (acc != out) std::memcpy(out, acc, static_cast<size_t>(n * dtype_size(t)));
    return;
  }
  const auto* wide = static_cast<const float*>(acc);
  auto* bits = static_cast<uint16_t*>(out);
  if (t == DType::Float16)
    for (int64_t i = 0; i < n; ++i) bits[i] = half_bits::half_from_float(wide[i]);
  else
    for (int64_t i = 0; i < n; ++i) bits[i] = half_bits::bfloat16_from_float(wide[i]);
}

}  // namespace tg::distributed
