// Reshaping views: view, reshape, flatten, squeeze, unsqueeze, expand, permute, transpose, t.
#include "ops/shape/view.h"

#include <algorithm>

#include "ops/core/dispatch.h"
#include "ops/elementwise/copy.h"
#include "ops/reduce/reduce.h"
#include "ops/shape/view_internal.h"

namespace tg {

TensorMeta view_meta(const Tensor& x, Shape sizes, Shape strides, int64_t offset) {
  return TensorMeta{std::move(sizes), std::move(strides), offset, x.dtype(), x.device()};
}

bool compute_view_strides(const Shape& sizes, const Shape& strides, const Shape& new_sizes, Shape& out) {
  out.assign(new_sizes.size(), 0);
  if (sizes.empty()) {  // a 0-dim tensor has one element: any all-ones shape views it
    std::fill(out.begin(), out.end(), 1);
    return true;
  }
  const int64_t numel = shape_numel(sizes);
  if (numel == 0 && sizes == new_sizes) {
    out = strides;
    return true;
  }
  if (numel == 0) {
    out = contiguous_strides(new_sizes);
    return true;
  }
  // Walk the old dims from the innermost, grouping them into chunks that are contiguous among
  // themselves; each chunk must be covered exactly by a run of new dims.
  int64_t view_d = static_cast<int64_t>(new_sizes.size()) - 1;
  int64_t chunk_base_stride = strides.back();
  int64_t tensor_numel = 1;
  int64_t view_numel = 1;
  for (int64_t tensor_d = static_cast<int64_t>(sizes.size()) - 1; tensor_d >= 0; --tensor_d) {
    tensor_numel *= sizes[static_cast<size_t>(tensor_d)];
    const bool chunk_ends = tensor_d == 0 || (sizes[static_cast<size_t>(tensor_d - 1)] != 1 &&
                                              strides[static_cast<size_t>(tensor_d - 1)] != tensor_numel * chunk_base_stride);
    if (!chunk_ends) continue;
    while (view_d >= 0 && (view_numel < tensor_numel || new_sizes[static_cast<size_t>(view_d)] == 1)) {
      out[static_cast<size_t>(view_d)] = view_numel * chunk_base_stride;
      view_numel *= new_sizes[static_cast<size_t>(view_d)];
      --view_d;
    }
    if (view_numel != tensor_numel) return false;
    if (tensor_d > 0) {
      chunk_base_stride = strides[static_cast<size_t>(tensor_d - 1)];
      tensor_numel = 1;
      view_numel = 1;
    }
  }
  return view_d == -1;
}

Shape infer_view_size(const Shape& sizes, int64_t numel, const char* op) {
  Shape out = sizes;
  int64_t known = 1;
  std::optional<size_t> infer_dim;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == -1) {
      TG_CHECK(!infer_dim, "[", op, "] only one dimension can be inferred, got shape ", shape_str(sizes));
      infer_dim = i;
    } else {
      TG_CHECK(out[i] >= 0, "[", op, "] invalid shape dimension ", out[i], " in shape ", shape_str(sizes));
      known *= out[i];
    }
  }
  if (infer_dim) {
    TG_CHECK(known != 0 && numel % known == 0, "[", op, "] shape '", shape_str(sizes),
             "' is invalid for input of size ", numel);
    out[*infer_dim] = numel / known;
  } else {
    TG_CHECK(known == numel, "[", op, "] shape '", shape_str(sizes), "' is invalid for input of size ", numel);
  }
  return out;
}

namespace {

// A view with new sizes over the same elements in the same order.
class ViewOp final : public ViewOpBase {
 public:
  explicit ViewOp(Shape sizes) : sizes_(std::move(sizes)) {}
  const OpSchema& schema() const override {
    static const OpSchema s{"view", kView, -1, 0};
    return s;
  }
  std::vector<TensorMeta> infer(const TensorList& in) const override {
    const Tensor& x = in[0];
    Shape sizes = infer_view_size(sizes_, x.numel(), "view");
    Shape strides;
    TG_CHECK(compute_view_strides(x.sizes(), x.strides(), sizes, strides),
             "[view] view size is not compatible with input tensor's size and stride (at least one dimension spans "
             "across two contiguous subspaces): input sizes ", shape_str(x.sizes()), ", strides ",
             shape_str(x.strides()), ", requested ", shape_str(sizes_), ". Use .reshape(...) instead.");
    return {view_meta(x, std::move(sizes), std::move(strides), x.storage_offset())};
  }
  TensorList backward(const BackwardContext& ctx, const TensorList& g) const override {
    return {reshape(g[0], ctx.input_meta(0).sizes)};
  }
  std::string attrs() const override { return "size=" + shape_str(sizes_); }

 private:
  Shape sizes_;
};

// Removes size-1 dims: all of them, or only `dim`.
class SqueezeOp final : public ViewOpBase {
 public:
  explicit SqueezeOp(std::optional<int64_t> dim) : dim_(dim) {}
  const OpSchema& schema() const override {
    static const OpSchema s{"squeeze", kView, -1, 0};
    return s;
  }
  std::vector<TensorMeta> infer(const TensorList& in) const override {
    const Tensor& x = in[0];
    std::optional<int64_t> only;
    if (dim_) only = wrap_dim(*dim_, x.dim(), "squeeze");
    Shape sizes, strides;
    for (int64_t d = 0; d < x.dim(); ++d) {
      const bool drop = x.sizes()[static_cast<size_t>(d)] == 1 && (!only || *only == d);
      if (drop) continue;
      sizes.push_back(x.sizes()[static_cast<size_t>(d)]);
      strides.push_back(x.strides()[static_cast<size_t>(d)]);
    }
    return {view_meta(x, std::move(sizes), std::move(strides), x.storage_offset())};
  }
  TensorList backward(const BackwardContext& ctx, const TensorList& g) const override {
    return {reshape(g[0], ctx.input_meta(0).sizes)};
  }
  std::string attrs() const override { return dim_ ? "dim=" + std::to_string(*dim_) : std::string(); }

 private:
  std::optional<int64_t> dim_;
};

// Inserts a size-1 dim at `dim` (in [-ndim-1, ndim]).
class UnsqueezeOp final : public ViewOpBase {
 public:
  explicit UnsqueezeOp(int64_t dim) : dim_(dim) {}
  const OpSchema& schema() const override {
    static const OpSchema s{"unsqueeze", kView, -1, 0};
    return s;
  }
  std::vector<TensorMeta> infer(const TensorList& in) const override {
    const Tensor& x = in[0];
    const int64_t d = wrap_dim(dim_, x.dim() + 1, "unsqueeze");
    Shape sizes = x.sizes(), strides = x.strides();
    const int64_t stride = d >= x.dim() ? 1 : sizes[static_cast<size_t>(d)] * strides[static_cast<size_t>(d)];
    sizes.insert(sizes.begin() + d, 1);
    strides.insert(strides.begin() + d, stride);
    return {view_meta(x, std::move(sizes), std::move(strides), x.storage_offset())};
  }
  TensorList backward(const BackwardContext& ctx, const TensorList& g) const override {
    return {reshape(g[0], ctx.input_meta(0).sizes)};
  }
  std::string attrs() const override { return "dim=" + std::to_string(dim_); }

 private:
  int64_t dim_;
};

// Broadcasts size-1 dims (stride 0) and prepends new leading dims; -1 keeps a size.
class ExpandOp final : public ViewOpBase {
 public:
  explicit ExpandOp(Shape sizes) : sizes_(std::move(sizes)) {}
  const OpSchema& schema() const override {
    static const OpSchema s{"expand", kView, -1, 0};
    return s;
  }
  std::vector<TensorMeta> infer(const TensorList& in) const override {
    const Tensor& x = in[0];
    const int64_t ndim = static_cast<int64_t>(sizes_.size());
    const int64_t xdim = x.dim();
    TG_CHECK(ndim >= xdim, "[expand] the number of sizes provided (", ndim, ") must be greater or equal to the "
             "number of dimensions in the tensor (", xdim, "): size=", shape_str(sizes_), ", tensor sizes ",
             shape_str(x.sizes()));
    Shape sizes(static_cast<size_t>(ndim)), strides(static_cast<size_t>(ndim));
    for (int64_t i = ndim - 1; i >= 0; --i) {
      const int64_t d = xdim - (ndim - i);
      int64_t size = d >= 0 ? x.sizes()[static_cast<size_t>(d)] : 1;
      int64_t stride = d >= 0 ? x.strides()[static_cast<size_t>(d)]
                              : (i + 1 < ndim ? sizes[static_cast<size_t>(i + 1)] * strides[static_cast<size_t>(i + 1)] : 1);
      int64_t target = sizes_[static_cast<size_t>(i)];
      if (target == -1) {
        TG_CHECK(d >= 0, "[expand] the expanded size of the tensor (-1) isn't allowed in a leading, non-existing "
                 "dimension ", i);
        target = size;
      }
      TG_CHECK(target >= 0, "[expand] invalid size ", target, " at dimension ", i, " in ", shape_str(sizes_));
      if (size != target) {
        TG_CHECK(size == 1, "[expand] the expanded size of the tensor (", target, ") must match the existing size (",
                 size, ") at non-singleton dimension ", i, ".  Target sizes: ", shape_str(sizes_),
                 ".  Tensor sizes: ", shape_str(x.sizes()));
        size = target;
        stride = 0;
      }
      sizes[static_cast<size_t>(i)] = size;
      strides[static_cast<size_t>(i)] = stride;
    }
    return {view_meta(x, std::move(sizes), std::move(strides), x.storage_offset())};
  }
  TensorList backward(const BackwardContext& ctx, const TensorList& g) const override {
    return {sum_to(g[0], ctx.input_meta(0).sizes)};
  }
  std::string attrs() const override { return "size=" + shape_str(sizes_); }

 private:
  Shape sizes_;
};

// Reorders dims: output dim i is input dim dims[i].
class PermuteOp final : public ViewOpBase {
 public:
  explicit PermuteOp(Shape dims) : dims_(std::move(dims)) {}
  const OpSchema& schema() const override {
    static const OpSchema s{"permute", kView, -1, 0};
    return s;
  }
  std::vector<TensorMeta> infer(const TensorList& in) const override {
    const Tensor& x = in[0];
    TG_CHECK(static_cast<int64_t>(dims_.size()) == x.dim(), "[permute] number of dimensions in the tensor input "
             "does not match the length of the desired ordering of dimensions i.e. input.dim() = ", x.dim(),
             " is not equal to len(dims) = ", dims_.size());
    Shape sizes(dims_.size()), strides(dims_.size());
    std::vector<bool> seen(dims_.size(), false);
    for (size_t i = 0; i < dims_.size(); ++i) {
      const auto d = static_cast<size_t>(wrap_dim(dims_[i], x.dim(), "permute"));
      TG_CHECK(!seen[d], "[permute] duplicate dims are not allowed: ", shape_str(dims_));
      seen[d] = true;
      sizes[i] = x.sizes()[d];
      strides[i] = x.strides()[d];
    }
    return {view_meta(x, std::move(sizes), std::move(strides), x.storage_offset())};
  }
  TensorList backward(const BackwardContext&, const TensorList& g) const override {
    const int64_t n = static_cast<int64_t>(dims_.size());
    Shape inverse(dims_.size());
    for (int64_t i = 0; i < n; ++i) inverse[static_cast<size_t>(wrap_dim(dims_[static_cast<size_t>(i)], n, "permute"))] = i;
    return {permute(g[0], inverse)};
  }
  std::string attrs() const override { return "dims=" + shape_str(dims_); }

 private:
  Shape dims_;
};

// Swaps two dims; `t` is the same view restricted to tensors of at most 2 dims.
class TransposeOp : public ViewOpBase {
 public:
  TransposeOp(int64_t dim0, int64_t dim1) : dim0_(dim0), dim1_(dim1) {}
  const OpSchema& schema() const override {
    static const OpSchema s{"transpose", kView, -1, 0};
    return s;
  }
  std::vector<TensorMeta> infer(const TensorList& in) const override {
    const Tensor& x = in[0];
    const auto a = static_cast<size_t>(wrap_dim(dim0_, x.dim(), "transpose"));
    const auto b = static_cast<size_t>(wrap_dim(dim1_, x.dim(), "transpose"));
    Shape sizes = x.sizes(), strides = x.strides();
    if (x.dim() > 0) {
      std::swap(sizes[a], sizes[b]);
      std::swap(strides[a], strides[b]);
    }
    return {view_meta(x, std::move(sizes), std::move(strides), x.storage_offset())};
  }
  TensorList backward(const BackwardContext&, const TensorList& g) const override {
    return {transpose(g[0], dim0_, dim1_)};
  }
  std::string attrs() const override { return "dim0=" + std::to_string(dim0_) + ", dim1=" + std::to_string(dim1_); }

 private:
  int64_t dim0_, dim1_;
};

// transpose(0, 1) for matrices, the identity for vectors and scalars.
class TOp final : public TransposeOp {
 public:
  explicit TOp(int64_t ndim) : TransposeOp(0, ndim < 2 ? 0 : 1) {}
  const OpSchema& schema() const override {
    static const OpSchema s{"t", kView, -1, 0};
    return s;
  }
  std::vector<TensorMeta> infer(const TensorList& in) const override {
    TG_CHECK(in[0].dim() <= 2, "[t] t() expects a tensor with <= 2 dimensions, but self is ", in[0].dim(), "D");
    return TransposeOp::infer(in);
  }
  TensorList backward(const BackwardContext&, const TensorList& g) const override { return {t(g[0])}; }
  std::string attrs() const override { return {}; }
};

}  // namespace

Tensor view(const Tensor& x, const Shape& sizes) { return call_op<ViewOp>({x}, sizes); }

Tensor reshape(const Tensor& x, const Shape& sizes) {
  const Shape target = infer_view_size(sizes, x.numel(), "reshape");
  Shape strides;
  if (compute_view_strides(x.sizes(), x.strides(), target, strides)) return view(x, target);
  return view(contiguous(x), target);
}

Tensor flatten(const Tensor& x, int64_t start_dim, int64_t end_dim) {
  if (x.dim() == 0) return reshape(x, {1});
  const int64_t s = wrap_dim(start_dim, x.dim(), "flatten");
  const int64_t e = wrap_dim(end_dim, x.dim(), "flatten");
  TG_CHECK(s <= e, "[flatten] flatten() has invalid args: start_dim (", start_dim, ") cannot come after end_dim (",
           end_dim, ")");
  if (s == e) return x;
  Shape sizes(x.sizes().begin(), x.sizes().begin() + s);
  int64_t n = 1;
  for (int64_t d = s; d <= e; ++d) n *= x.sizes()[static_cast<size_t>(d)];
  sizes.push_back(n);
  sizes.insert(sizes.end(), x.sizes().begin() + e + 1, x.sizes().end());
  return reshape(x, sizes);
}

Tensor unflatten(const Tensor& x, int64_t dim, const Shape& sizes) {
  const int64_t d = wrap_dim(dim, x.dim(), "unflatten");
  TG_CHECK(!sizes.empty(), "[unflatten] expected sizes to be non-empty");
  const int64_t extent = x.size(d);
  int64_t known = 1, inferred = -1;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] == -1) {
      TG_CHECK(inferred < 0, "[unflatten] only one dimension can be inferred, got sizes ", shape_str(sizes));
      inferred = static_cast<int64_t>(i);
    } else {
      TG_CHECK(sizes[i] >= 0, "[unflatten] invalid size ", sizes[i], " in ", shape_str(sizes));
      known *= sizes[i];
    }
  }
  Shape split = sizes;
  if (inferred >= 0) {
    TG_CHECK(known != 0 && extent % known == 0, "[unflatten] cannot infer -1 in ", shape_str(sizes),
             " for dim ", d, " of size ", extent);
    split[static_cast<size_t>(inferred)] = extent / known;
  } else {
    TG_CHECK(known == extent, "[unflatten] provided sizes ", shape_str(sizes), " don't multiply up to the size of dim ",
             d, " (", extent, ") in the input tensor of shape ", shape_str(x.sizes()));
  }
  Shape out(x.sizes().begin(), x.sizes().begin() + d);
  out.insert(out.end(), split.begin(), split.end());
  out.insert(out.end(), x.sizes().begin() + d + 1, x.sizes().end());
  return view(x, out);
}

Tensor squeeze(const Tensor& x) { return call_op<SqueezeOp>({x}, std::nullopt); }
Tensor squeeze(const Tensor& x, int64_t dim) { return call_op<SqueezeOp>({x}, std::optional<int64_t>(dim)); }
Tensor unsqueeze(const Tensor& x, int64_t dim) { return call_op<UnsqueezeOp>({x}, dim); }
Tensor expand(const Tensor& x, const Shape& sizes) { return call_op<ExpandOp>({x}, sizes); }
Tensor permute(const Tensor& x, const Shape& dims) { return call_op<PermuteOp>({x}, dims); }
Tensor transpose(const Tensor& x, int64_t dim0, int64_t dim1) { return call_op<TransposeOp>({x}, dim0, dim1); }
Tensor t(const Tensor& x) { return call_op<TOp>({x}, x.dim()); }

Tensor Tensor::view(const Shape& sizes) const { return tg::view(*this, sizes); }
Tensor Tensor::reshape(const Shape& sizes) const { return tg::reshape(*this, sizes); }
Tensor Tensor::flatten(int64_t start_dim, int64_t end_dim) const { return tg::flatten(*this, start_dim, end_dim); }
Tensor Tensor::squeeze() const { return tg::squeeze(*this); }
Tensor Tensor::squeeze(int64_t dim) const { return tg::squeeze(*this, dim); }
Tensor Tensor::unsqueeze(int64_t dim) const { return tg::unsqueeze(*this, dim); }
Tensor Tensor::expand(const Shape& sizes) const { return tg::expand(*this, sizes); }
Tensor Tensor::permute(const Shape& dims) const { return tg::permute(*this, dims); }
Tensor Tensor::transpose(int64_t dim0, int64_t dim1) const { return tg::transpose(*this, dim0, dim1); }
Tensor Tensor::t() const { return tg::t(*this); }

}  // namespace tg
