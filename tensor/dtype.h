// Element types, their sizes and names, and PyTorch's type-promotion rules.
#pragma once

#include <cstdint>
#include <string_view>

#include "tensor/half.h"

namespace tg {

// The element types a tensor can hold.
// Ordered for promotion: a later dtype wins, except that float16 with bfloat16 gives float32.
enum class DType : uint8_t { Bool, Int32, Int64, Float16, BFloat16, Float32, Float64 };

inline constexpr DType kBool = DType::Bool;
inline constexpr DType kInt32 = DType::Int32;
inline constexpr DType kInt64 = DType::Int64;
inline constexpr DType kFloat16 = DType::Float16;
inline constexpr DType kBFloat16 = DType::BFloat16;
inline constexpr DType kFloat32 = DType::Float32;
inline constexpr DType kFloat64 = DType::Float64;

// Bytes per element.
constexpr int64_t dtype_size(DType t) {
  switch (t) {
    case DType::Bool: return 1;
    case DType::Int32: return 4;
    case DType::Int64: return 8;
    case DType::Float16: return 2;
    case DType::BFloat16: return 2;
    case DType::Float32: return 4;
    case DType::Float64: return 8;
  }
  return 0;
}

// PyTorch's spelling: "float32", "int64", "bool", ...
std::string_view dtype_name(DType t);

constexpr bool is_floating(DType t) {
  return t == DType::Float16 || t == DType::BFloat16 || t == DType::Float32 || t == DType::Float64;
}
// True for float16 and bfloat16.
constexpr bool is_low_precision(DType t) { return t == DType::Float16 || t == DType::BFloat16; }
constexpr bool is_integral(DType t, bool include_bool) {
  return t == DType::Int32 || t == DType::Int64 || (include_bool && t == DType::Bool);
}

// The dtype two tensor operands promote to (float beats int beats bool; wider beats narrower).
DType promote_types(DType a, DType b);

// Category of a Python-style scalar operand: it only lifts a tensor to a higher category.
enum class ScalarKind : uint8_t { Bool, Integral, Floating };

// The dtype of `tensor op scalar`: the scalar never widens within the tensor's category.
DType promote_with_scalar(DType tensor, ScalarKind scalar);

// The default floating dtype (float32), used when ints are lifted to floats.
inline constexpr DType kDefaultFloat = DType::Float32;

// C++ type of an element for each dtype.
template <DType D> struct dtype_cpp;
template <> struct dtype_cpp<DType::Bool> { using type = bool; };
template <> struct dtype_cpp<DType::Int32> { using type = int32_t; };
template <> struct dtype_cpp<DType::Int64> { using type = int64_t; };
template <> struct dtype_cpp<DType::Float16> { using type = Half; };
template <> struct dtype_cpp<DType::BFloat16> { using type = BFloat16; };
template <> struct dtype_cpp<DType::Float32> { using type = float; };
template <> struct dtype_cpp<DType::Float64> { using type = double; };

// The dtype of a C++ element type.
template <typename T> constexpr DType dtype_of();
template <> constexpr DType dtype_of<bool>() { return DType::Bool; }
template <> constexpr DType dtype_of<int32_t>() { return DType::Int32; }
template <> constexpr DType dtype_of<int64_t>() { return DType::Int64; }
template <> constexpr DType dtype_of<Half>() { return DType::Float16; }
template <> constexpr DType dtype_of<BFloat16>() { return DType::BFloat16; }
template <> constexpr DType dtype_of<float>() { return DType::Float32; }
template <> constexpr DType dtype_of<double>() { return DType::Float64; }

}  // namespace tg

// Runs the body with `scalar_t` bound to the C++ type of `dtype` (every dtype).
#define TG_DISPATCH_ALL(dtype, NAME, ...)                                                   \
  [&] {                                                                                     \
    switch (dtype) {                                                                        \
      case ::tg::DType::Bool: { using scalar_t = bool; return __VA_ARGS__(); }              \
      case ::tg::DType::Int32: { using scalar_t = int32_t; return __VA_ARGS__(); }          \
      case ::tg::DType::Int64: { using scalar_t = int64_t; return __VA_ARGS__(); }          \
      case ::tg::DType::Float16: { using scalar_t = ::tg::Half; return __VA_ARGS__(); }       \
      case ::tg::DType::BFloat16: { using scalar_t = ::tg::BFloat16; return __VA_ARGS__(); }  \
      case ::tg::DType::Float32: { using scalar_t = float; return __VA_ARGS__(); }          \
      case ::tg::DType::Float64: { using scalar_t = double; return __VA_ARGS__(); }         \
    }                                                                                       \
    TG_FAIL("[", NAME, "] unsupported dtype ", ::tg::dtype_name(dtype));                    \
  }()

// Runs the body for numeric dtypes (no bool).
#define TG_DISPATCH_NUMERIC(dtype, NAME, ...)                                               \
  [&] {                                                                                     \
    switch (dtype) {                                                                        \
      case ::tg::DType::Int32: { using scalar_t = int32_t; return __VA_ARGS__(); }          \
      case ::tg::DType::Int64: { using scalar_t = int64_t; return __VA_ARGS__(); }          \
      case ::tg::DType::Float16: { using scalar_t = ::tg::Half; return __VA_ARGS__(); }       \
      case ::tg::DType::BFloat16: { using scalar_t = ::tg::BFloat16; return __VA_ARGS__(); }  \
      case ::tg::DType::Float32: { using scalar_t = float; return __VA_ARGS__(); }          \
      case ::tg::DType::Float64: { using scalar_t = double; return __VA_ARGS__(); }         \
      default: break;                                                                       \
    }                                                                                       \
    TG_FAIL("[", NAME, "] expected a numeric dtype, got ", ::tg::dtype_name(dtype));        \
  }()

// Runs the body for floating dtypes only.
#define TG_DISPATCH_FLOATING(dtype, NAME, ...)                                              \
  [&] {                                                                                     \
    switch (dtype) {                                                                        \
      case ::tg::DType::Float16: { using scalar_t = ::tg::Half; return __VA_ARGS__(); }       \
      case ::tg::DType::BFloat16: { using scalar_t = ::tg::BFloat16; return __VA_ARGS__(); }  \
      case ::tg::DType::Float32: { using scalar_t = float; return __VA_ARGS__(); }          \
      case ::tg::DType::Float64: { using scalar_t = double; return __VA_ARGS__(); }         \
      default: break;                                                                       \
    }                                                                                       \
    TG_FAIL("[", NAME, "] expected a floating dtype, got ",            \
            ::tg::dtype_name(dtype));                                                       \
  }()

// Runs the body for float32 and float64: kernels that 16-bit floats reach only widened to float32
// (ops/core/widen.h).
#define TG_DISPATCH_FLOAT_DOUBLE(dtype, NAME, ...)                                          \
  [&] {                                                                                     \
    switch (dtype) {                                                                        \
      case ::tg::DType::Float32: { using scalar_t = float; return __VA_ARGS__(); }          \
      case ::tg::DType::Float64: { using scalar_t = double; return __VA_ARGS__(); }         \
      default: break;                                                                       \
    }                                                                                       \
    TG_FAIL("[", NAME, "] expected float32 or float64 here, got ", ::tg::dtype_name(dtype)); \
  }()
