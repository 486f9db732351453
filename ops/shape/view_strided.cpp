// as_strided: a view with explicit geometry, and its storage-level gradient.
#include <algorithm>

#include "ops/core/dispatch.h"
#include "ops/elementwise/binary.h"
#include "ops/factory/factory.h"
#include "ops/shape/join.h"
#include "ops/shape/view.h"
#include "ops/shape/view_internal.h"

namespace tg {
namespace {

// Largest storage element index reached by a geometry (offset itself for empty geometries).
int64_t last_element(const Shape& sizes, const Shape& strides, int64_t offset) {
  int64_t last = offset;
  for (size_t i = 0; i < sizes.size(); ++i) last += (sizes[i] - 1) * strides[i];
  return last;
}

class AsStridedOp final : public ViewOpBase {
 public:
  AsStridedOp(Shape sizes, Shape strides, std::optional<int64_t> offset)
      : sizes_(std::move(sizes)), strides_(std::move(strides)), offset_(offset) {}
  const OpSchema& schema() const override {
    static const OpSchema s{"as_strided", kView, -1, 0};
    return s;
  }
  std::vector<TensorMeta> infer(const TensorList& in) const override {
    const Tensor& x = in[0];
    TG_CHECK(sizes_.size() == strides_.size(), "[as_strided] mismatch in length of strides and shape: sizes ",
             shape_str(sizes_), ", strides ", shape_str(strides_));
    for (size_t i = 0; i < sizes_.size(); ++i) {
      TG_CHECK(sizes_[i] >= 0, "[as_strided] Trying to create tensor with negative dimension ", sizes_[i], ": ",
               shape_str(sizes_));
      TG_CHECK(strides_[i] >= 0, "[as_strided] Negative strides are not supported at the moment, got strides: ",
               shape_str(strides_));
    }
    const int64_t offset = offset_.value_or(x.storage_offset());
    TG_CHECK(offset >= 0, "[as_strided] Tensor: invalid storage offset ", offset);
    if (shape_numel(sizes_) > 0) {
      const int64_t need = (last_element(sizes_, strides_, offset) + 1) * x.element_size();
      const int64_t have = x.impl()->storage()->nbytes();
      TG_CHECK(need <= have, "[as_strided] setStorage: sizes ", shape_str(sizes_), ", strides ", shape_str(strides_),
               ", storage offset ", offset, ", and itemsize ", x.element_size(), " requiring a storage size of ", need,
               " are out of bounds for storage of size ", have);
    }
    return {view_meta(x, sizes_, strides_, offset)};
  }
  TensorList backward(const BackwardContext& ctx, const TensorList& g) const override {
    const TensorMeta& m = ctx.input_meta(0);
    return {as_strided_backward(g[0], m, sizes_, strides_, offset_.value_or(m.offset))};
  }
  std::string attrs() const override {
    return "size=" + shape_str(sizes_) + ", stride=" + shape_str(strides_) +
           (offset_ ? ", storage_offset=" + std::to_string(*offset_) : std::string());
  }

 private:
  Shape sizes_, strides_;
  std::optional<int64_t> offset_;
};

// Storage index of every element of a geometry, in row-major order (int64, 1-D), built from
// factories and arithmetic so that it also works on fake tensors.
Tensor storage_positions(const Shape& sizes, const Shape& strides, int64_t offset, Device device) {
  Tensor pos = full({}, offset, {.dtype = kInt64, .device = device});
  for (size_t d = 0; d < sizes.size(); ++d) {
    Shape shape(sizes.size(), 1);
    shape[d] = sizes[d];
    pos = add(pos, mul(arange(sizes[d], {.dtype = kInt64, .device = device}), strides[d]).view(shape));
  }
  return pos.reshape({-1});
}

}  // namespace

Tensor as_strided_backward(const Tensor& grad, const TensorMeta& input, const Shape& sizes, const Shape& strides,
                           int64_t offset) {
  const TensorOptions opts{.dtype = grad.dtype(), .device = grad.device()};
  if (shape_numel(input.sizes) == 0) return zeros(input.sizes, opts);
  if (shape_numel(sizes) == 0) return zeros(input.sizes, opts);
  const int64_t base = std::min(input.offset, offset);
  const int64_t extent = std::max(last_element(input.sizes, input.strides, input.offset),
                                  last_element(sizes, strides, offset)) - base + 1;
  const Tensor out_pos = storage_positions(sizes, strides, offset - base, grad.device());
  const Tensor in_pos = storage_positions(input.sizes, input.strides, input.offset - base, grad.device());
  // Scatter-add: output elements that alias one storage slot all contribute to it.
  Tensor storage = index_add(zeros({extent}, opts), 0, out_pos, grad.reshape({-1}));
  Tensor result = index_select(storage, 0, in_pos);
  if (has_internal_overlap(input.sizes, input.strides)) {
    // Input elements sharing a slot split that slot's gradient evenly, as PyTorch does.
    Tensor count = index_add(zeros({extent}, opts), 0, in_pos, ones({shape_numel(input.sizes)}, opts));
    result = div(result, index_select(count, 0, in_pos));
  }
  return result.view(input.sizes);
}

Tensor as_strided(const Tensor& x, const Shape& sizes, const Shape& strides, std::optional<int64_t> offset) {
  return call_op<AsStridedOp>({x}, sizes, strides, offset);
}

Tensor Tensor::as_strided(const Shape& sizes, const Shape& strides, std::optional<int64_t> offset) const {
  return tg::as_strided(*this, sizes, strides, offset);
}

}  // namespace tg
