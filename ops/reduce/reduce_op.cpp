#include "ops/reduce/reduce_op.h"

#include "ops/shape/view.h"

namespace tg {

std::string DimReduceOp::attrs() const {
  const std::string dims = dims_.empty() ? std::string("all") : shape_str(dims_);
  return "dim=" + dims + ", keepdim=" + (keepdim_ ? "true" : "false");
}

int64_t DimReduceOp::reduced_count(const Shape& sizes, const std::vector<bool>& mask) {
  int64_t n = 1;
  for (size_t i = 0; i < sizes.size(); ++i)
    if (mask[i]) n *= sizes[i];
  return n;
}

Tensor DimReduceOp::as_keepdim(const Tensor& t, const Shape& input_sizes) const {
  if (keepdim_) return t;
  const auto m = mask(static_cast<int64_t>(input_sizes.size()));
  return reshape(t, reduced_sizes(input_sizes, m, true));
}

Tensor DimReduceOp::expand_to_input(const Tensor& grad, const Shape& input_sizes) const {
  return expand(as_keepdim(grad, input_sizes), input_sizes);
}

}  // namespace tg
