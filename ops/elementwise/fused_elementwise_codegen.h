// CUDA C++ source for a fused elementwise group: what the CUDA path of fused_elementwise compiles
// (with NVRTC) and launches. Host code only, so sources can be generated and inspected anywhere.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ops/elementwise/fused_elementwise.h"

namespace tg {

// How a dtype appears in generated CUDA C++: its type in memory and the type its math runs in.
struct CudaTypeNames {
  const char* storage;
  const char* compute;
};
// The one mapping from dtypes to CUDA C++ types (reduced-precision dtypes are to compute in float).
CudaTypeNames cuda_type_names(DType dtype);

// How the kernel reaches an operand's element for linear output index i.
enum class OperandAccess : uint8_t {
  Linear,     // element i: dense and laid out like the iteration
  Broadcast,  // element 0 for every i
  Strided,    // an offset from the iteration's sizes and the operand's strides
};

// The iteration of one launch. Operand 0 is the output, inputs follow, read as if expanded to the
// output's shape; size-1 dims are dropped and neighbouring dims merged where every operand allows.
struct FusedGeometry {
  int64_t numel = 0;
  std::vector<int64_t> sizes;                 // per dim, innermost first
  std::vector<std::vector<int64_t>> strides;  // per operand, per dim (elements)
  std::vector<OperandAccess> access;          // per operand

  bool any_strided() const;
};

// The iteration writing an output laid out as `out` from inputs laid out as `inputs`.
FusedGeometry fused_geometry(const TensorMeta& out, const std::vector<TensorMeta>& inputs);

// The generated kernel's entry point.
inline constexpr const char* kFusedKernelName = "tg_fused_elementwise";

// Source of the kernel computing `program` with `geometry`'s access pattern: a grid-stride loop,
// each input element read once, intermediates in registers, one store. The source depends only on
// the program (ops, dtypes, constants) and on each operand's access and the number of dims, so it
// serves as the cache key of the compiled kernel; sizes and strides are kernel arguments.
std::string fused_kernel_source(const FusedProgram& program, const FusedGeometry& geometry);

// The kernel's one parameter, as 8-byte fields in the generated struct's order: the output and
// input pointers, numel, then (with strided operands) the sizes and each strided operand's strides.
std::vector<int64_t> fused_kernel_args(const FusedGeometry& geometry, const std::vector<const void*>& pointers);

}  // namespace tg
