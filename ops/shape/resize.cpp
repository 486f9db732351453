// Metadata mutations: resize_ and set_ change a tensor's geometry or storage in place.
#include "ops/core/dispatch.h"
#include "ops/elementwise/copy.h"

namespace tg {
namespace {

// Contiguous geometry of new sizes at the tensor's offset; storage grows (never shrinks) to fit.
class ResizeOp final : public Op {
 public:
  explicit ResizeOp(Shape sizes) : sizes_(std::move(sizes)) {}
  const OpSchema& schema() const override {
    static const OpSchema s{"resize_", kInPlace | kMetadataMutation, 0, -1};
    return s;
  }
  std::vector<TensorMeta> infer(const TensorList& in) const override {
    const Tensor& x = in[0];
    TG_CHECK(!x.requires_grad(), "[resize_] cannot resize variables that require grad");
    for (int64_t s : sizes_)
      TG_CHECK(s >= 0, "[resize_] Trying to create tensor with negative dimension ", s, ": ", shape_str(sizes_));
    if (x.sizes() == sizes_) return single_output(meta_of(x));  // same sizes keep the strides, as in PyTorch
    TensorMeta m = contiguous_meta(sizes_, x.dtype(), x.device());
    m.offset = x.storage_offset();
    return {m};
  }
  void eval(const TensorList&, TensorList& out) const override {
    TensorImpl* impl = out[0].impl();
    if (impl->sizes() == sizes_) return;
    const int64_t numel = shape_numel(sizes_);
    if (numel > 0) impl->storage()->grow((impl->storage_offset() + numel) * dtype_size(impl->dtype()));
    impl->set_geometry(impl->storage(), sizes_, contiguous_strides(sizes_), impl->storage_offset());
  }
  TensorList backward(const BackwardContext&, const TensorList&) const override {
    TG_FAIL("[resize_] cannot resize variables that require grad");
  }
  SaveSpec saves() const override { return {false, false}; }
  std::string attrs() const override { return "size=" + shape_str(sizes_); }

 private:
  Shape sizes_;
};

// Makes the target an alias of source: same storage, sizes, strides and offset.
class SetOp final : public Op {
 public:
  const OpSchema& schema() const override {
    static const OpSchema s{"set_", kInPlace | kMetadataMutation, 0, -1};
    return s;
  }
  std::vector<TensorMeta> infer(const TensorList& in) const override {
    const Tensor &x = in[0], &source = in[1];
    TG_CHECK(x.dtype() == source.dtype(), "[set_] expected source of dtype ", dtype_name(x.dtype()),
             " (the tensor's dtype), got ", dtype_name(source.dtype()));
    TG_CHECK(x.device() == source.device(), "[set_] expected source on ", x.device().str(),
             " (the tensor's device), got ", source.device().str());
    return single_output(meta_of(source));
  }
  void eval(const TensorList& in, TensorList& out) const override {
    const TensorImpl& src = *in[1].impl();
    TensorImpl* impl = out[0].impl();
    if (impl == &src) return;
    impl->set_geometry(src.storage(), src.sizes(), src.strides(), src.storage_offset());
    // The tensor no longer aliases its old base; writes to it must not be routed there.
    impl->set_view_base(nullptr);
  }
  // The new value is source's value: the gradient flows to source, none to the old contents.
  TensorList backward(const BackwardContext&, const TensorList& g) const override { return {Tensor(), g[0]}; }
  SaveSpec saves() const override { return {false, false}; }
};

}  // namespace

Tensor& resize_(Tensor& x, const Shape& sizes) {
  dispatch(std::make_shared<const ResizeOp>(sizes), {x});
  return x;
}

Tensor& set_(Tensor& x, const Tensor& source) {
  dispatch(std::make_shared<const SetOp>(), {x, source});
  return x;
}

Tensor& Tensor::resize_(const Shape& sizes) { return tg::resize_(*this, sizes); }
Tensor& Tensor::set_(const Tensor& source) { return tg::set_(*this, source); }

}  // namespace tg
