// Indexing views along one dim: slice, narrow, select, and the ops their gradients scatter with.
#include <limits>

#include "ops/core/dispatch.h"
#include "ops/elementwise/copy.h"
#include "ops/shape/view.h"
#include "ops/shape/view_internal.h"

namespace tg {
namespace {

// Python slice bounds clamped into [0, size], with start <= end.
struct SliceBounds {
  int64_t start, end;
};

SliceBounds clamp_slice(int64_t size, std::optional<int64_t> start, std::optional<int64_t> end) {
  int64_t s = start.value_or(0);
  int64_t e = end.value_or(std::numeric_limits<int64_t>::max());
  if (s < 0) s += size;
  if (e < 0) e += size;
  s = s < 0 ? 0 : (s > size ? size : s);
  e = e < s ? s : (e > size ? size : e);
  return {s, e};
}

// x[start:end:step] along dim, as a view.
class SliceOp final : public ViewOpBase {
 public:
  SliceOp(int64_t dim, std::optional<int64_t> start, std::optional<int64_t> end, int64_t step)
      : dim_(dim), start_(start), end_(end), step_(step) {}
  const OpSchema& schema() const override {
    static const OpSchema s{"slice", kView, -1, 0};
    return s;
  }
  std::vector<TensorMeta> infer(const TensorList& in) const override {
    const Tensor& x = in[0];
    TG_CHECK(x.dim() > 0, "[slice] slice() cannot be applied to a 0-dim tensor.");
    TG_CHECK(step_ > 0, "[slice] slice step must be positive, got ", step_);
    const auto d = static_cast<size_t>(wrap_dim(dim_, x.dim(), "slice"));
    const SliceBounds b = clamp_slice(x.sizes()[d], start_, end_);
    Shape sizes = x.sizes(), strides = x.strides();
    sizes[d] = (b.end - b.start + step_ - 1) / step_;
    strides[d] *= step_;
    return {view_meta(x, std::move(sizes), std::move(strides), x.storage_offset() + b.start * x.strides()[d])};
  }
  TensorList backward(const BackwardContext& ctx, const TensorList& g) const override {
    const TensorMeta& m = ctx.input_meta(0);
    const int64_t d = wrap_dim(dim_, static_cast<int64_t>(m.sizes.size()), "slice");
    const SliceBounds b = clamp_slice(m.sizes[static_cast<size_t>(d)], start_, end_);
    return {slice_backward(g[0], m.sizes, d, b.start, b.end, step_)};
  }
  std::string attrs() const override {
    return "dim=" + std::to_string(dim_) + ", start=" + (start_ ? std::to_string(*start_) : "None") +
           ", end=" + (end_ ? std::to_string(*end_) : "None") + ", step=" + std::to_string(step_);
  }

 private:
  int64_t dim_;
  std::optional<int64_t> start_, end_;
  int64_t step_;
};

// x[..., index, ...] along dim, removing that dim.
class SelectOp final : public ViewOpBase {
 public:
  SelectOp(int64_t dim, int64_t index) : dim_(dim), index_(index) {}
  const OpSchema& schema() const override {
    static const OpSchema s{"select", kView, -1, 0};
    return s;
  }
  std::vector<TensorMeta> infer(const TensorList& in) const override {
    const Tensor& x = in[0];
    TG_CHECK(x.dim() > 0, "[select] select() cannot be applied to a 0-dim tensor.");
    const auto d = static_cast<size_t>(wrap_dim(dim_, x.dim(), "select"));
    const int64_t size = x.sizes()[d];
    TG_CHECK(index_ >= -size && index_ < size, "[select] select(): index ", index_,
             " out of range for tensor of size ", shape_str(x.sizes()), " at dimension ", d);
    const int64_t i = index_ < 0 ? index_ + size : index_;
    Shape sizes = x.sizes(), strides = x.strides();
    const int64_t offset = x.storage_offset() + i * strides[d];
    sizes.erase(sizes.begin() + static_cast<int64_t>(d));
    strides.erase(strides.begin() + static_cast<int64_t>(d));
    return {view_meta(x, std::move(sizes), std::move(strides), offset)};
  }
  TensorList backward(const BackwardContext& ctx, const TensorList& g) const override {
    const TensorMeta& m = ctx.input_meta(0);
    const int64_t d = wrap_dim(dim_, static_cast<int64_t>(m.sizes.size()), "select");
    const int64_t size = m.sizes[static_cast<size_t>(d)];
    return {select_backward(g[0], m.sizes, d, index_ < 0 ? index_ + size : index_)};
  }
  std::string attrs() const override { return "dim=" + std::to_string(dim_) + ", index=" + std::to_string(index_); }

 private:
  int64_t dim_, index_;
};

// Zeros of the input's sizes with the gradient written into the sliced region.
class SliceBackwardOp final : public Op {
 public:
  SliceBackwardOp(Shape sizes, int64_t dim, int64_t start, int64_t end, int64_t step)
      : sizes_(std::move(sizes)), dim_(dim), start_(start), end_(end), step_(step) {}
  const OpSchema& schema() const override {
    static const OpSchema s{"slice_backward", 0, -1, -1};
    return s;
  }
  std::vector<TensorMeta> infer(const TensorList& in) const override {
    const Tensor& g = in[0];
    Shape expected = sizes_;
    expected[static_cast<size_t>(dim_)] = (end_ - start_ + step_ - 1) / step_;
    TG_CHECK(g.sizes() == expected, "[slice_backward] expected a gradient of sizes ", shape_str(expected), ", got ",
             shape_str(g.sizes()));
    return single_output(contiguous_meta(sizes_, g.dtype(), g.device()));
  }
  void eval(const TensorList& in, TensorList& out) const override {
    out[0].zero_();
    slice(out[0], dim_, start_, end_, step_).copy_(in[0]);
  }
  TensorList backward(const BackwardContext&, const TensorList& g) const override {
    return {slice(g[0], dim_, start_, end_, step_)};
  }
  SaveSpec saves() const override { return {false, false}; }
  std::string attrs() const override {
    return "dim=" + std::to_string(dim_) + ", start=" + std::to_string(start_) + ", end=" + std::to_string(end_) +
           ", step=" + std::to_string(step_);
  }
  SliceBackwardRegion region() const { return {sizes_, dim_, start_, end_, step_}; }

 private:
  Shape sizes_;
  int64_t dim_, start_, end_, step_;
};

// Zeros of the input's sizes with the gradient written at the selected index.
class SelectBackwardOp final : public Op {
 public:
  SelectBackwardOp(Shape sizes, int64_t dim, int64_t index) : sizes_(std::move(sizes)), dim_(dim), index_(index) {}
  const OpSchema& schema() const override {
    static const OpSchema s{"select_backward", 0, -1, -1};
    return s;
  }
  std::vector<TensorMeta> infer(const TensorList& in) const override {
    const Tensor& g = in[0];
    Shape expected = sizes_;
    expected.erase(expected.begin() + dim_);
    TG_CHECK(g.sizes() == expected, "[select_backward] expected a gradient of sizes ", shape_str(expected), ", got ",
             shape_str(g.sizes()));
    return single_output(contiguous_meta(sizes_, g.dtype(), g.device()));
  }
  void eval(const TensorList& in, TensorList& out) const override {
    out[0].zero_();
    select(out[0], dim_, index_).copy_(in[0]);
  }
  TensorList backward(const BackwardContext&, const TensorList& g) const override {
    return {select(g[0], dim_, index_)};
  }
  SaveSpec saves() const override { return {false, false}; }
  std::string attrs() const override { return "dim=" + std::to_string(dim_) + ", index=" + std::to_string(index_); }

 private:
  Shape sizes_;
  int64_t dim_, index_;
};

}  // namespace

Tensor slice_backward(const Tensor& grad, const Shape& input_sizes, int64_t dim, int64_t start, int64_t end,
                      int64_t step) {
  return call_op<SliceBackwardOp>({grad}, input_sizes, dim, start, end, step);
}

std::optional<SliceBackwardRegion> slice_backward_region(const Op& op) {
  if (const auto* s = dynamic_cast<const SliceBackwardOp*>(&op)) return s->region();
  return std::nullopt;
}

Tensor select_backward(const Tensor& grad, const Shape& input_sizes, int64_t dim, int64_t index) {
  return call_op<SelectBackwardOp>({grad}, input_sizes, dim, index);
}

Tensor slice(const Tensor& x, int64_t dim, std::optional<int64_t> start, std::optional<int64_t> end, int64_t step) {
  return call_op<SliceOp>({x}, dim, start, end, step);
}

Tensor narrow(const Tensor& x, int64_t dim, int64_t start, int64_t length) {
  TG_CHECK(x.dim() > 0, "[narrow] narrow() cannot be applied to a 0-dim tensor.");
  TG_CHECK(length >= 0, "[narrow] narrow(): length must be non-negative, got ", length);
  const int64_t size = x.size(wrap_dim(dim, x.dim(), "narrow"));
  TG_CHECK(start >= -size && start <= size, "[narrow] start out of range (expected to be in range of [", -size, ", ",
           size, "], but got ", start, ")");
  if (start < 0) start += size;
  TG_CHECK(start <= size - length, "[narrow] start (", start, ") + length (", length, ") exceeds dimension size (",
           size, ").");
  return slice(x, dim, start, start + length, 1);
}

Tensor select(const Tensor& x, int64_t dim, int64_t index) { return call_op<SelectOp>({x}, dim, index); }

Tensor Tensor::slice(int64_t dim, std::optional<int64_t> start, std::optional<int64_t> end, int64_t step) const {
  return tg::slice(*this, dim, start, end, step);
}
Tensor Tensor::narrow(int64_t dim, int64_t start, int64_t length) const {
  return tg::narrow(*this, dim, start, length);
}
Tensor Tensor::select(int64_t dim, int64_t index) const { return tg::select(*this, dim, index); }

}  // namespace tg
