// Dtype dispatch over the groups that kernel files split their instances by: a file that
// instantiates heavy kernels per dtype covers the floating dtypes (TG_DISPATCH_FLOATING) or the
// exact ones here, so that no single file compiles them all.
#pragma once

#include "tensor/dtype.h"

// Runs the body for the integer dtypes (no bool).
#define TG_DISPATCH_INTEGER(dtype, NAME, ...)                                               \
  [&] {                                                                                     \
    switch (dtype) {                                                                        \
      case ::tg::DType::Int32: { using scalar_t = int32_t; return __VA_ARGS__(); }          \
      case ::tg::DType::Int64: { using scalar_t = int64_t; return __VA_ARGS__(); }          \
      default: break;                                                                       \
    }                                                                                       \
    TG_FAIL("[", NAME, "] expected an integer dtype, got ", ::tg::dtype_name(dtype));       \
  }()

// Runs the body for bool and the integer dtypes: the exact ones, which kernel files that split
// their instances by dtype group take apart from the floating ones.
#define TG_DISPATCH_EXACT(dtype, NAME, ...)                                                 \
  [&] {                                                                                     \
    switch (dtype) {                                                                        \
      case ::tg::DType::Bool: { using scalar_t = bool; return __VA_ARGS__(); }              \
      case ::tg::DType::Int32: { using scalar_t = int32_t; return __VA_ARGS__(); }          \
      case ::tg::DType::Int64: { using scalar_t = int64_t; return __VA_ARGS__(); }          \
      default: break;                                                                       \
    }                                                                                       \
    TG_FAIL("[", NAME, "] expected bool or an integer dtype, got ", ::tg::dtype_name(dtype)); \
  }()
