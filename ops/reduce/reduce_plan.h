// Reduction geometry shared by the CPU and CUDA kernels: which dims are reduced, the output shape,
// and the input viewed as (kept index, reduced index) pairs with adjacent dims merged.
#pragma once

#include <cstdint>
#include <vector>

#include "tensor/hd.h"
#include "tensor/shape.h"

namespace tg {

// Most dims a reduction may have after merging; kernels index with fixed-size arrays.
inline constexpr int kMaxReduceDims = 12;

// Strided walk over a row-major index space: linear index -> element offset.
struct StridedSpace {
  int ndim = 0;
  int64_t sizes[kMaxReduceDims] = {};
  int64_t strides[kMaxReduceDims] = {};
};

// Offset of the element with row-major index `linear` in `space`.
// `linear` must be below the space's element count (the outermost dim then needs no division).
TG_HD int64_t offset_at(const StridedSpace& space, int64_t linear) {
  int64_t offset = 0;
  for (int d = space.ndim - 1; d > 0; --d) {
    offset += (linear % space.sizes[d]) * space.strides[d];
    linear /= space.sizes[d];
  }
  return space.ndim > 0 ? offset + linear * space.strides[0] : offset;
}

// The input of a reduction seen as out[o] = reduce over r of x[kept(o) + reduced(r)].
struct ReducePlan {
  StridedSpace kept;     // in output order; output element o is contiguous index o
  StridedSpace reduced;  // merged, in memory-friendly order unless the logical order was asked for
  int64_t n_out = 1;
  int64_t n_red = 1;
};

// Flags for each dim of an ndim tensor: true where `dims` names it (all dims when `dims` is empty).
// Wraps negative dims and rejects out-of-range or repeated dims, naming the op.
std::vector<bool> reduced_dim_mask(const Shape& dims, int64_t ndim, const char* op);
// Sizes of the result: reduced dims dropped, or kept as 1 with keepdim.
Shape reduced_sizes(const Shape& sizes, const std::vector<bool>& mask, bool keepdim);
// Builds the plan for reducing (sizes, strides) over `mask`. With logical_order the reduced index r
// is the row-major index over the reduced dims (argmax needs it); otherwise dims are reordered by stride.
ReducePlan make_reduce_plan(const Shape& sizes, const Shape& strides, const std::vector<bool>& mask,
                            bool logical_order = false);

}  // namespace tg
