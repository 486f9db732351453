#include "tensor/dtype.h"

#include "tensor/check.h"

namespace tg {

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::Bool: return "bool";
    case DType::Int32: return "int32";
    case DType::Int64: return "int64";
    case DType::Float16: return "float16";
    case DType::BFloat16: return "bfloat16";
    case DType::Float32: return "float32";
    case DType::Float64: return "float64";
  }
  return "unknown";
}

DType promote_types(DType a, DType b) {
  // The enum is ordered bool < int32 < int64 < float16 < bfloat16 < float32 < float64 (int64 with a
  // float gives the float); the two 16-bit floats hold different ranges and meet in float32.
  if ((a == DType::Float16 && b == DType::BFloat16) || (a == DType::BFloat16 && b == DType::Float16))
    return DType::Float32;
  return static_cast<uint8_t>(a) > static_cast<uint8_t>(b) ? a : b;
}

DType promote_with_scalar(DType tensor, ScalarKind scalar) {
  switch (scalar) {
    case ScalarKind::Bool: return tensor;
    case ScalarKind::Integral: return tensor == DType::Bool ? DType::Int64 : tensor;
    case ScalarKind::Floating: return is_floating(tensor) ? tensor : kDefaultFloat;
  }
  return tensor;
}

}  // namespace tg
