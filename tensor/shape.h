// Sizes and strides: contiguity, element counts, broadcasting and dim wrapping.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tensor/shape_vector.h"

namespace tg {

// Product of the sizes (1 for a 0-dim tensor).
int64_t shape_numel(const Shape& sizes);
// Row-major strides for `sizes`.
Shape contiguous_strides(const Shape& sizes);
// True when `strides` are row-major for `sizes` (dims of size 1 may have any stride).
bool is_contiguous_layout(const Shape& sizes, const Shape& strides);
// Elements a storage needs to hold every element of (sizes, strides) from offset 0 (0 when empty).
int64_t storage_span(const Shape& sizes, const Shape& strides);
// "[2, 3]".
std::string shape_str(const Shape& s);
// Maps a possibly negative dim into [0, ndim); the error names the op and the valid range.
int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op);
// The broadcast of two shapes; the error names the op and both shapes.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);
// Strides that read a tensor of (sizes, strides) as if expanded to `target` (0 for broadcast dims).
Shape broadcast_strides(const Shape& sizes, const Shape& strides, const Shape& target);
// True when two distinct indices of (sizes, strides) can address the same element.
bool has_internal_overlap(const Shape& sizes, const Shape& strides);

}  // namespace tg
