// Joining tensors: cat along an existing dim and stack along a new one.
#include "ops/shape/join.h"

#include "ops/core/dispatch.h"
#include "ops/elementwise/copy.h"
#include "ops/factory/factory.h"
#include "ops/shape/view.h"
#include "tensor/shape.h"

namespace tg {
namespace {

// PyTorch's legacy rule: 1-D tensors with no elements are ignored by cat, whatever their size.
bool skipped_by_cat(const Shape& sizes) { return sizes.size() == 1 && sizes[0] == 0; }

// The wrapped cat dim, against the first tensor that is not skipped (-1 when all are skipped).
int64_t cat_dim(const std::vector<const Shape*>& shapes, int64_t dim) {
  for (const Shape* s : shapes)
    if (!skipped_by_cat(*s)) return wrap_dim(dim, static_cast<int64_t>(s->size()), "cat");
  return -1;
}

class CatOp final : public Op {
 public:
  CatOp(int64_t dim, size_t count) : dim_(dim), count_(count) {}
  const OpSchema& schema() const override {
    static const OpSchema s{"cat", 0, -1, -1};
    return s;
  }
  std::vector<TensorMeta> infer(const TensorList& in) const override {
    TG_CHECK(!in.empty(), "[cat] torch.cat(): expected a non-empty list of Tensors");
    DType dtype = in[0].dtype();
    const Device device = in[0].device();
    std::vector<const Shape*> shapes;
    for (size_t i = 0; i < in.size(); ++i) {
      TG_CHECK(in[i].dim() > 0, "[cat] zero-dimensional tensor (at position ", i, ") cannot be concatenated");
      TG_CHECK(in[i].device() == device, "[cat] expected all tensors to be on the same device, but found ",
               device.str(), " (tensor 0) and ", in[i].device().str(), " (tensor ", i, ")");
      dtype = promote_types(dtype, in[i].dtype());
      shapes.push_back(&in[i].sizes());
    }
    const int64_t d = cat_dim(shapes, dim_);
    if (d < 0) return single_output(contiguous_meta({0}, dtype, device));
    size_t ref = 0;
    while (skipped_by_cat(in[ref].sizes())) ++ref;
    Shape out = in[ref].sizes();
    out[static_cast<size_t>(d)] = 0;
    for (size_t i = 0; i < in.size(); ++i) {
      const Shape& s = in[i].sizes();
      if (skipped_by_cat(s)) continue;
      TG_CHECK(s.size() == out.size(), "[cat] torch.cat(): Tensors must have same number of dimensions: got ",
               out.size(), " and ", s.size(), " (tensor ", i, " has sizes ", shape_str(s), ")");
      for (size_t k = 0; k < s.size(); ++k) {
        if (static_cast<int64_t>(k) == d) continue;
        TG_CHECK(s[k] == in[ref].sizes()[k], "[cat] torch.cat(): Sizes of tensors must match except in dimension ",
                 d, ". Expected size ", in[ref].sizes()[k], " but got size ", s[k], " for tensor number ", i,
                 " in the list (sizes ", shape_str(s), " vs ", shape_str(in[ref].sizes()), ").");
      }
      out[static_cast<size_t>(d)] += s[static_cast<size_t>(d)];
    }
    return single_output(contiguous_meta(std::move(out), dtype, device));
  }
  void eval(const TensorList& in, TensorList& out) const override {
    const int64_t d = wrap_dim(dim_, out[0].dim(), "cat");
    int64_t offset = 0;
    for (const Tensor& t : in) {
      if (skipped_by_cat(t.sizes())) continue;
      const int64_t len = t.size(d);
      if (len > 0) narrow(out[0], d, offset, len).copy_(t);
      offset += len;
    }
  }
  TensorList backward(const BackwardContext& ctx, const TensorList& g) const override {
    TensorList grads;
    int64_t offset = 0;
    for (size_t i = 0; i < count_; ++i) {
      const TensorMeta& m = ctx.input_meta(i);
      if (skipped_by_cat(m.sizes)) {
        grads.push_back(ctx.needs_input_grad(i) ? zeros(m.sizes, {.dtype = m.dtype, .device = m.device}) : Tensor());
        continue;
      }
      const int64_t d = wrap_dim(dim_, g[0].dim(), "cat");
      const int64_t len = m.sizes[static_cast<size_t>(d)];
      if (ctx.needs_input_grad(i)) {
        Tensor part = narrow(g[0], d, offset, len);
        grads.push_back(part.dtype() == m.dtype ? part : part.to(m.dtype));
      } else {
        grads.emplace_back();
      }
      offset += len;
    }
    return grads;
  }
  SaveSpec saves() const override { return {false, false}; }
  std::string attrs() const override { return "dim=" + std::to_string(dim_); }

 private:
  int64_t dim_;
  size_t count_;  // number of tensors joined, so backward returns one gradient each
};

}  // namespace

Tensor cat(const TensorList& tensors, int64_t dim) {
  return call_op<CatOp>(tensors, dim, tensors.size());
}

OpPtr cat_op(int64_t dim, size_t count) { return std::make_shared<CatOp>(dim, count); }

Tensor stack(const TensorList& tensors, int64_t dim) {
  TG_CHECK(!tensors.empty(), "[stack] stack expects a non-empty TensorList");
  for (size_t i = 1; i < tensors.size(); ++i) {
    TG_CHECK(tensors[i].sizes() == tensors[0].sizes(), "[stack] stack expects each tensor to be equal size, but got ",
             shape_str(tensors[0].sizes()), " at entry 0 and ", shape_str(tensors[i].sizes()), " at entry ", i);
  }
  const int64_t d = wrap_dim(dim, tensors[0].dim() + 1, "stack");
  TensorList parts;
  parts.reserve(tensors.size());
  for (const Tensor& t : tensors) parts.push_back(unsqueeze(t, d));
  return cat(parts, d);
}

Tensor repeat(const Tensor& x, const Shape& repeats) {
  const auto dims = static_cast<int64_t>(repeats.size());
  TG_CHECK(dims >= x.dim(), "[repeat] expected at least as many repeats as the tensor has dims (", x.dim(),
           "), got ", shape_str(repeats));
  // Each dim of size s repeated r times: a [1, s] pair expanded to [r, s], then merged into r * s.
  Shape paired, expanded, out;
  for (int64_t i = 0; i < dims; ++i) {
    const int64_t r = repeats[static_cast<size_t>(i)];
    TG_CHECK(r >= 0, "[repeat] expected repeats of at least 0, got ", shape_str(repeats));
    const int64_t s = i < dims - x.dim() ? 1 : x.size(i - (dims - x.dim()));
    paired.push_back(1);
    paired.push_back(s);
    expanded.push_back(r);
    expanded.push_back(s);
    out.push_back(r * s);
  }
  return reshape(expand(reshape(x, paired), expanded), out);
}

Tensor Tensor::repeat(const Shape& repeats) const { return tg::repeat(*this, repeats); }

}  // namespace tg
