// gather and scatter_add reduce to index_select / index_add over the flattened input: the index
// tensor becomes linear offsets (other dims from broadcast aranges), so both devices and the
// gradients (index_select <-> index_add) come from those ops. An index outside [0, size(dim)) is
// mapped to -1, which index_select/index_add reject, so it never lands silently in another row.
#include "ops/index/gather.h"

#include "ops/elementwise/binary.h"
#include "ops/elementwise/compare.h"
#include "ops/factory/factory.h"
#include "ops/shape/join.h"
#include "ops/shape/view.h"
#include "tensor/shape.h"

namespace tg {
namespace {

// Checks the index against x (and src) as torch.gather/scatter_add do; returns the wrapped dim.
int64_t check_gather(const char* op, const Tensor& x, int64_t dim, const Tensor& index, const Tensor* src) {
  TG_CHECK(index.dtype() == kInt64, "[", op, "] Expected dtype int64 for index, got ", dtype_name(index.dtype()));
  TG_CHECK(index.device() == x.device(), "[", op, "] expected index on ", x.device().str(),
           " (the input's device), got ", index.device().str());
  const int64_t nd = std::max<int64_t>(x.dim(), 1);
  const int64_t d = wrap_dim(dim, nd, op);
  TG_CHECK(std::max<int64_t>(index.dim(), 1) == nd, "[", op,
           "] Index tensor must have the same number of dimensions as input tensor, got index of shape ",
           shape_str(index.sizes()), " and input of shape ", shape_str(x.sizes()));
  for (int64_t i = 0; i < index.dim() && x.dim() > 0; ++i) {
    if (i == d) continue;
    TG_CHECK(index.size(i) <= x.size(i), "[", op, "] Size does not match at dimension ", i,
             " expected index ", shape_str(index.sizes()), " to be no larger than self ", shape_str(x.sizes()),
             " apart from dimension ", d);
  }
  if (src != nullptr) {
    TG_CHECK(src->dtype() == x.dtype(), "[", op, "] Expected self.dtype to be equal to src.dtype, got ",
             dtype_name(x.dtype()), " and ", dtype_name(src->dtype()));
    TG_CHECK(src->device() == x.device(), "[", op, "] expected src on ", x.device().str(), ", got ",
             src->device().str());
    TG_CHECK(std::max<int64_t>(src->dim(), 1) == nd, "[", op,
             "] Index tensor must have the same number of dimensions as src tensor, got index of shape ",
             shape_str(index.sizes()), " and src of shape ", shape_str(src->sizes()));
    for (int64_t i = 0; i < index.dim() && src->dim() > 0; ++i)
      TG_CHECK(index.size(i) <= src->size(i), "[", op, "] Expected index ", shape_str(index.sizes()),
               " to be no larger than src ", shape_str(src->sizes()), " in every dimension");
  }
  return d;
}

// Flat offsets into a contiguous tensor of x's shape for every position of `index` (-1 where the
// index is out of range).
Tensor linear_offsets(const Tensor& x, int64_t d, const Tensor& index) {
  const TensorOptions opt{.dtype = kInt64, .device = x.device()};
  if (x.dim() == 0) {
    Tensor ok = eq(index, Scalar(int64_t{0}));
    return where(ok, index, full(index.sizes(), int64_t{-1}, opt)).reshape({-1});
  }
  const Shape xs = contiguous_strides(x.sizes());
  const int64_t n = index.dim();
  Tensor off = mul(index, Scalar(xs[static_cast<size_t>(d)]));
  for (int64_t i = 0; i < n; ++i) {
    if (i == d || index.size(i) == 1) continue;
    Shape shape(static_cast<size_t>(n), 1);
    shape[static_cast<size_t>(i)] = index.size(i);
    off = add(off, mul(arange(index.size(i), opt), Scalar(xs[static_cast<size_t>(i)])).reshape(shape));
  }
  Tensor ok = where(ge(index, Scalar(int64_t{0})), lt(index, Scalar(x.size(d))),
                    full({}, false, {.dtype = kBool, .device = x.device()}));
  return where(ok, off, full({}, int64_t{-1}, opt)).reshape({-1});
}

// src narrowed to index's sizes (scatter_add reads only that corner of src).
Tensor corner(const Tensor& src, const Tensor& index) {
  Tensor out = src;
  for (int64_t i = 0; i < index.dim(); ++i)
    if (out.size(i) != index.size(i)) out = out.narrow(i, 0, index.size(i));
  return out;
}

}  // namespace

Tensor gather(const Tensor& x, int64_t dim, const Tensor& index) {
  const int64_t d = check_gather("gather", x, dim, index, nullptr);
  if (index.numel() == 0) return zeros(index.sizes(), {.dtype = x.dtype(), .device = x.device()});
  const Tensor offsets = linear_offsets(x, d, index);
  return index_select(x.reshape({-1}), 0, offsets).reshape(index.sizes());
}

Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  const int64_t d = check_gather("scatter_add", x, dim, index, &src);
  if (index.numel() == 0) return x.clone();
  const Tensor offsets = linear_offsets(x, d, index);
  const Tensor flat_src = corner(src.dim() == 0 ? src.reshape({1}) : src, index).reshape({-1});
  return index_add(x.reshape({-1}), 0, offsets, flat_src).reshape(x.sizes());
}

Tensor Tensor::gather(int64_t dim, const Tensor& index) const { return tg::gather(*this, dim, index); }

}  // namespace tg
