// Geometry shared by the CPU and CUDA softmax kernels: a tensor seen as rows along one dim.
#pragma once

#include <cstdint>

#include "ops/reduce/reduce_plan.h"
#include "tensor/tensor.h"

namespace tg {

// Which row-wise computation a softmax kernel runs (a = first input, b = second input):
// Softmax/LogSoftmax: out = f(a); the backward modes take a = grad of the output, b = the output.
enum class SoftmaxMode { Softmax, LogSoftmax, SoftmaxBackward, LogSoftmaxBackward };

// A tensor as n_rows rows of `length` elements along one dim, each `stride` apart.
struct RowGeometry {
  StridedSpace rows;  // row index -> offset of the row's first element
  int64_t stride = 0;
  int64_t length = 1;
  int64_t n_rows = 1;
};

// Rows of `t` along `dim` (already wrapped; any value for a 0-dim tensor).
inline RowGeometry row_geometry(const Tensor& t, int64_t dim) {
  RowGeometry g;
  std::vector<bool> mask(static_cast<size_t>(t.dim()), false);
  if (t.dim() > 0) {
    mask[static_cast<size_t>(dim)] = true;
    g.stride = t.strides()[static_cast<size_t>(dim)];
    g.length = t.sizes()[static_cast<size_t>(dim)];
  }
  const ReducePlan plan = make_reduce_plan(t.sizes(), t.strides(), mask);
  g.rows = plan.kept;
  g.n_rows = plan.n_out;
  return g;
}

}  // namespace tg
