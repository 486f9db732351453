// tril/triu/masked_fill as `where` over comparison masks: one elementwise select on either
// device, and the gradient is where's (zero where the value was replaced).
#include "ops/index/masking.h"

#include "ops/elementwise/binary.h"
#include "ops/elementwise/compare.h"
#include "ops/factory/factory.h"
#include "ops/shape/view.h"
#include "tensor/shape.h"

namespace tg {
namespace {

Tensor triangle(const char* op, const Tensor& x, int64_t diagonal, bool lower) {
  TG_CHECK(x.dim() >= 2, "[", op, "] input tensor must have at least 2 dimensions, got shape ", shape_str(x.sizes()));
  Tensor keep = triangle_mask(x.size(-2), x.size(-1), diagonal, lower, x.device());
  return where(keep, x, scalar_tensor(0, {.dtype = x.dtype(), .device = x.device()}));
}

}  // namespace

Tensor triangle_mask(int64_t rows, int64_t cols, int64_t diagonal, bool lower, Device device) {
  Tensor r = arange(rows, {.dtype = kInt64, .device = device}).unsqueeze(1);
  Tensor c = arange(cols, {.dtype = kInt64, .device = device}).unsqueeze(0);
  Tensor offset = sub(c, r);  // [rows, cols]: col - row
  return lower ? le(offset, Scalar(diagonal)) : ge(offset, Scalar(diagonal));
}

Tensor tril(const Tensor& x, int64_t diagonal) { return triangle("tril", x, diagonal, true); }

Tensor triu(const Tensor& x, int64_t diagonal) { return triangle("triu", x, diagonal, false); }

Tensor masked_fill(const Tensor& x, const Tensor& mask, Scalar value) {
  TG_CHECK(mask.dtype() == kBool, "[masked_fill] expected a bool mask, got ", dtype_name(mask.dtype()));
  TG_CHECK(mask.device() == x.device() || mask.dim() == 0, "[masked_fill] expected the mask on ", x.device().str(),
           " (the input's device), got ", mask.device().str());
  bool fits = mask.dim() <= x.dim();
  for (int64_t i = 1; fits && i <= mask.dim(); ++i)
    fits = mask.size(-i) == 1 || mask.size(-i) == x.size(-i);
  TG_CHECK(fits, "[masked_fill] mask of shape ", shape_str(mask.sizes()),
           " must be broadcastable to the input's shape ", shape_str(x.sizes()));
  return where(mask, scalar_tensor(value, {.dtype = x.dtype(), .device = x.device()}), x);
}

Tensor Tensor::masked_fill(const Tensor& mask, Scalar value) const { return tg::masked_fill(*this, mask, value); }
Tensor& Tensor::masked_fill_(const Tensor& mask, Scalar value) {
  // masked_fill checks that the mask broadcasts to this tensor's shape, so the copy back fits.
  return copy_(tg::masked_fill(*this, mask, value));
}
Tensor Tensor::tril(int64_t diagonal) const { return tg::tril(*this, diagonal); }
Tensor Tensor::triu(int64_t diagonal) const { return tg::triu(*this, diagonal); }

}  // namespace tg
