// Pieces shared by the reduction ops (sum, mean, amax/amin, var): dims handling, the output rule,
// and spreading a reduced gradient back over the input.
#pragma once

#include <string>

#include "ops/core/op.h"
#include "ops/reduce/reduce_plan.h"

namespace tg {

// A reduction over a list of dims (all when empty) with keepdim.
class DimReduceOp : public Op {
 public:
  DimReduceOp(Shape dims, bool keepdim) : dims_(std::move(dims)), keepdim_(keepdim) {}
  std::string attrs() const override;

 protected:
  // Reduced-dim flags for an input of `ndim` dims (validates the dims list).
  std::vector<bool> mask(int64_t ndim) const { return reduced_dim_mask(dims_, ndim, schema().name.data()); }
  // Number of elements each output reduces, from the input sizes.
  static int64_t reduced_count(const Shape& sizes, const std::vector<bool>& mask);
  // Broadcasts a gradient of the output back to the input's sizes (a view, no copy).
  Tensor expand_to_input(const Tensor& grad, const Shape& input_sizes) const;
  // Reshapes a tensor of the output's shape to the keepdim shape (so it broadcasts against the input).
  Tensor as_keepdim(const Tensor& t, const Shape& input_sizes) const;

  Shape dims_;
  bool keepdim_;
};

}  // namespace tg
