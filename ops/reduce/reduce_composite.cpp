#include "ops/reduce/reduce_composite.h"

#include <cmath>

#include "ops/core/autocast.h"
#include "ops/elementwise/binary.h"
#include "ops/elementwise/compare.h"
#include "ops/elementwise/unary.h"
#include "ops/factory/factory.h"
#include "ops/index/gather.h"
#include "ops/reduce/reduce.h"
#include "ops/shape/view.h"
#include "tensor/check.h"
#include "tensor/grad_mode.h"

namespace tg {
namespace {

// The values at `index` (from argmax or argmin along dim, kept) and the index, squeezed unless
// keepdim: gather's gradient sends the values' gradient to that index alone.
std::pair<Tensor, Tensor> values_at(const Tensor& x, int64_t dim, const Tensor& index, bool keepdim) {
  Tensor values = gather(x, dim, index);
  if (keepdim) return {values, index};
  return {squeeze(values, dim), squeeze(index, dim)};
}

// max(x, dim) or min(x, dim); a 0-dim x takes dim 0 or -1 and gives itself and index 0, as PyTorch.
std::pair<Tensor, Tensor> select_along(const char* op, const Tensor& x, int64_t dim, bool keepdim, bool largest) {
  if (x.dim() == 0) {
    TG_CHECK(dim == 0 || dim == -1, "[", op, "] dim ", dim, " is out of range for a 0-dim tensor (expected 0 or -1)");
    return select_along(op, reshape(x, {1}), 0, false, largest);
  }
  TG_CHECK(dim >= -x.dim() && dim < x.dim(), "[", op, "] dim ", dim, " is out of range for a tensor of ", x.dim(),
           " dims");
  TG_CHECK(x.size(dim) > 0, "[", op, "] cannot reduce dim ", dim, " of size 0 (shape ", shape_str(x.sizes()), ")");
  const int64_t d = dim < 0 ? dim + x.dim() : dim;
  const Tensor index = largest ? argmax(x, d, true) : argmin(x, d, true);
  return values_at(x, d, index, keepdim);
}

// total^(1/ord) for total >= 0, with the root taken of 1 where total is 0 and that result replaced
// by 0: the value is the same, and the gradient there is 0 (PyTorch's for std and norms) rather than
// the root's infinite slope times 0.
Tensor zero_safe_root(const Tensor& total, double ord) {
  const Tensor zero = eq(total, Scalar(0));
  const Tensor safe = where(zero, ones_like(total), total);
  const Tensor root = ord == 2 ? sqrt(safe) : pow(safe, Scalar(1.0 / ord));
  return where(zero, zeros_like(total), root);
}

}  // namespace

Tensor max(const Tensor& x) {
  TG_CHECK(x.numel() > 0, "[max] cannot reduce an empty tensor (shape ", shape_str(x.sizes()), ") without a dim");
  return amax(x);
}

Tensor min(const Tensor& x) {
  TG_CHECK(x.numel() > 0, "[min] cannot reduce an empty tensor (shape ", shape_str(x.sizes()), ") without a dim");
  return amin(x);
}

std::pair<Tensor, Tensor> max(const Tensor& x, int64_t dim, bool keepdim) {
  return select_along("max", x, dim, keepdim, true);
}

std::pair<Tensor, Tensor> min(const Tensor& x, int64_t dim, bool keepdim) {
  return select_along("min", x, dim, keepdim, false);
}

Tensor argmin(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  TG_CHECK(x.dtype() != kBool, "[argmin] expected a numeric dtype, got bool");
  // The first maximum of an order-reversing map of x: -x for floating dtypes (NaN stays NaN, found
  // as argmax finds it), -1 - x for integers (exact over the whole two's-complement range).
  GradModeGuard no_grad(false);
  const Tensor reversed = is_floating(x.dtype()) ? neg(x) : rsub(x, Scalar(-1));
  return argmax(reversed, dim, keepdim);
}

Tensor std(const Tensor& x, const Shape& dims, int64_t correction, bool keepdim) {
  return zero_safe_root(var(x, dims, correction, keepdim), 2);
}

Tensor vector_norm(const Tensor& input, double ord, const Shape& dims, bool keepdim) {
  TG_CHECK(is_floating(input.dtype()), "[vector_norm] expected a floating dtype, got ", dtype_name(input.dtype()));
  TG_CHECK(!std::isnan(ord) && ord != 0 && (ord > 0 || std::isinf(ord)), "[vector_norm] ord ", ord,
           " is not supported: expected a positive number or +-infinity (for the count of nonzeros, "
           "ne(x, 0).sum())");
  // On PyTorch's CUDA autocast float32 list (norm), as every order computes it.
  const Tensor x = autocast::to_float(input, autocast::kCudaList);
  const Tensor a = abs(x);
  if (std::isinf(ord)) return ord > 0 ? amax(a, dims, keepdim) : amin(a, dims, keepdim);
  if (ord == 1) return sum(a, dims, keepdim);
  return zero_safe_root(ord == 2 ? sum(mul(x, x), dims, keepdim) : sum(pow(a, Scalar(ord)), dims, keepdim), ord);
}

Tensor Tensor::max() const { return tg::max(*this); }
Tensor Tensor::min() const { return tg::min(*this); }
std::pair<Tensor, Tensor> Tensor::max(int64_t dim, bool keepdim) const { return tg::max(*this, dim, keepdim); }
std::pair<Tensor, Tensor> Tensor::min(int64_t dim, bool keepdim) const { return tg::min(*this, dim, keepdim); }
Tensor Tensor::argmin(std::optional<int64_t> dim, bool keepdim) const { return tg::argmin(*this, dim, keepdim); }
Tensor Tensor::std(const Shape& dims, int64_t correction, bool keepdim) const {
  return tg::std(*this, dims, correction, keepdim);
}
Tensor Tensor::norm(double ord, const Shape& dims, bool keepdim) const {
  return tg::vector_norm(*this, ord, dims, keepdim);
}

}  // namespace tg
