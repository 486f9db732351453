// Copies and conversions: copy_ (broadcast, any dtype, any device), clone, contiguous, to, fill_, zero_,
// and the cast of a list of tensors as one op. resize_ and set_ live in ops/shape/resize.cpp.
#include "ops/elementwise/copy.h"

#include <cstring>

#include "ops/core/dispatch.h"
#include "ops/elementwise/cpu/elementwise.h"
#include "ops/elementwise/elementwise.h"
#include "ops/elementwise/pointwise.h"
#include "tensor/cuda_runtime.h"

#ifdef TG_WITH_CUDA
#include "ops/elementwise/cuda/elementwise.h"
#include "ops/elementwise/cuda/multi_tensor_cast.h"
#endif

namespace tg {
namespace {

// A fresh contiguous tensor for staging a copy (no dispatch: this runs inside a kernel).
Tensor staging_tensor(const Shape& sizes, DType dtype, Device device) {
  auto storage = std::make_shared<StorageImpl>(device, shape_numel(sizes) * dtype_size(dtype));
  return Tensor(std::make_shared<TensorImpl>(std::move(storage), sizes, contiguous_strides(sizes), 0, dtype));
}

void copy_bytes_between(const Tensor& dst, const Tensor& src) {
  cuda::memcpy(dst.raw_data(), dst.device(), src.raw_data(), src.device(), dst.numel() * dst.element_size());
}

bool same_dense_layout(const Tensor& dst, const Tensor& src) {
  return dst.dtype() == src.dtype() && dst.sizes() == src.sizes() && dst.is_contiguous() && src.is_contiguous();
}

void copy_kernel(const Tensor& dst, const Tensor& src);

// Bytes cross devices only as one dense block of dst's dtype and shape: convert/expand on the
// source side, move, then scatter into dst's strides on the destination side when it is strided.
void copy_across_devices(const Tensor& dst, const Tensor& src) {
  if (same_dense_layout(dst, src)) {
    copy_bytes_between(dst, src);
    return;
  }
  Tensor staged = src;
  if (!(src.dtype() == dst.dtype() && src.sizes() == dst.sizes() && src.is_contiguous())) {
    staged = staging_tensor(dst.sizes(), dst.dtype(), src.device());
    copy_kernel(staged, src);
  }
  if (dst.is_contiguous()) {
    copy_bytes_between(dst, staged);
    return;
  }
  Tensor landing = staging_tensor(dst.sizes(), dst.dtype(), dst.device());
  copy_bytes_between(landing, staged);
  copy_kernel(dst, landing);
}

// dst[...] = convert(src[...]) with src broadcast to dst's shape; any devices.
void copy_kernel(const Tensor& dst, const Tensor& src) {
  if (dst.numel() == 0) return;
  if (dst.device() != src.device()) {
    copy_across_devices(dst, src);
    return;
  }
  if (dst.is_cpu() && same_dense_layout(dst, src)) {
    if (dst.raw_data() != src.raw_data()) std::memcpy(dst.raw_data(), src.raw_data(), dst.numel() * dst.element_size());
    return;
  }
  const TensorIter it = TensorIter::make(dst, {&src});
#ifdef TG_WITH_CUDA
  if (dst.is_cuda()) {
    cuda::launch_copy(it);
    return;
  }
#endif
  cpu::launch_copy(it);
}

// True when `from` expands to `to` (PyTorch's expand rule: align right, size-1 dims stretch).
bool broadcasts_to(const Shape& from, const Shape& to) {
  if (from.size() > to.size()) return false;
  const size_t lead = to.size() - from.size();
  for (size_t i = 0; i < from.size(); ++i)
    if (from[i] != 1 && from[i] != to[lead + i]) return false;
  return true;
}

constexpr uint32_t kEw = kElementwise;
const OpSchema kCopySchema{"copy_", kEw | kInPlace | kOverwritesTarget, 0};
const OpSchema kCopyAcrossSchema{"copy_", kEw | kInPlace | kDeviceCopy | kOverwritesTarget, 0};

// copy_(dst, src): writes src (broadcast, converted) into dst; the gradient goes to src only.
class CopyOp final : public Op {
 public:
  explicit CopyOp(bool across) : across_(across) {}
  const OpSchema& schema() const override { return across_ ? kCopyAcrossSchema : kCopySchema; }

  std::vector<TensorMeta> infer(const TensorList& in) const override {
    const Tensor& dst = in[0];
    const Tensor& src = in[1];
    TG_CHECK(!src.is_meta() || dst.is_meta(), "[copy_] cannot copy out of a meta tensor: it has no data");
    TG_CHECK(broadcasts_to(src.sizes(), dst.sizes()), "[copy_] source of shape ", shape_str(src.sizes()),
             " cannot be broadcast to the destination shape ", shape_str(dst.sizes()));
    check_no_partial_overlap("copy_", dst, src);
    return single_output(meta_of(dst));
  }

  void eval(const TensorList& in, TensorList& out) const override { copy_kernel(out[0], in[1]); }

  TensorList backward(const BackwardContext& ctx, const TensorList& grads) const override {
    TensorList gi(2);  // dst's old value is overwritten: no gradient
    if (ctx.needs_input_grad(1)) gi[1] = reduce_grad(grads[0], ctx.input_meta(1));
    return gi;
  }

  SaveSpec saves() const override { return {.inputs = false}; }

 private:
  bool across_;
};

const OpSchema kCloneSchema{"clone", kEw};

class CloneOp final : public Op {
 public:
  const OpSchema& schema() const override { return kCloneSchema; }
  std::vector<TensorMeta> infer(const TensorList& in) const override {
    TensorMeta m;
    m.sizes = in[0].sizes();
    m.dtype = in[0].dtype();
    m.device = in[0].device();
    return {std::move(m)};
  }
  void eval(const TensorList& in, TensorList& out) const override { copy_kernel(out[0], in[0]); }
  bool pointwise(const std::vector<TensorMeta>& in, PointwiseMath& math) const override {
    math.family = PointwiseFamily::Convert;
    math.compute = in[0].dtype;
    return true;
  }
  TensorList backward(const BackwardContext&, const TensorList& grads) const override { return {grads[0]}; }
  SaveSpec saves() const override { return {.inputs = false}; }
};

const OpSchema kToSchema{"_to_copy", kEw};
const OpSchema kToAcrossSchema{"_to_copy", kEw | kDeviceCopy};

// A contiguous copy with another dtype and/or device (PyTorch's _to_copy).
class ToCopyOp final : public Op {
 public:
  ToCopyOp(Device device, DType dtype, bool across) : device_(device), dtype_(dtype), across_(across) {}
  const OpSchema& schema() const override { return across_ ? kToAcrossSchema : kToSchema; }

  std::vector<TensorMeta> infer(const TensorList& in) const override {
    TG_CHECK(!in[0].is_meta() || device_.is_meta(), "[to] cannot copy out of a meta tensor to ", device_.str(),
             ": it has no data");
    TensorMeta m;
    m.sizes = in[0].sizes();
    m.dtype = dtype_;
    m.device = device_;
    return {std::move(m)};
  }

  void eval(const TensorList& in, TensorList& out) const override { copy_kernel(out[0], in[0]); }

  // A cast on one device; a move between devices is never fused.
  bool pointwise(const std::vector<TensorMeta>&, PointwiseMath& math) const override {
    if (across_) return false;
    math.family = PointwiseFamily::Convert;
    math.compute = dtype_;
    return true;
  }

  TensorList backward(const BackwardContext& ctx, const TensorList& grads) const override {
    return {reduce_grad(grads[0], ctx.input_meta(0))};
  }

  SaveSpec saves() const override { return {.inputs = false}; }
  std::string attrs() const override {
    return "dtype=" + std::string(dtype_name(dtype_)) + ", device=" + device_.str();
  }

 private:
  Device device_;
  DType dtype_;
  bool across_;
};

const OpSchema kFillSchema{"fill_", kEw | kInPlace | kOverwritesTarget, 0};

class FillOp final : public Op {
 public:
  explicit FillOp(Scalar value) : value_(value) {}
  const OpSchema& schema() const override { return kFillSchema; }
  std::vector<TensorMeta> infer(const TensorList& in) const override { return single_output(meta_of(in[0])); }

  void eval(const TensorList&, TensorList& out) const override {
    const TensorIter it = TensorIter::make(out[0], {});
#ifdef TG_WITH_CUDA
    if (out[0].is_cuda()) {
      cuda::launch_fill(value_, it);
      return;
    }
#endif
    cpu::launch_fill(value_, it);
  }

  TensorList backward(const BackwardContext&, const TensorList&) const override { return {Tensor()}; }
  SaveSpec saves() const override { return {.inputs = false}; }
  std::string attrs() const override { return "value=" + scalar_str(value_); }

 private:
  Scalar value_;
};

// Every input cast to one dtype on its own device: out[i] = in[i].to(dtype), contiguous. On CUDA the
// float32 <-> 16-bit casts of contiguous inputs run as one kernel per source dtype.
class MultiTensorCastOp final : public Op {
 public:
  MultiTensorCastOp(DType dtype, size_t count) : dtype_(dtype), count_(count) {}
  const OpSchema& schema() const override {
    static const OpSchema s{"multi_tensor_cast", 0, -1, -1};
    return s;
  }
  std::vector<TensorMeta> infer(const TensorList& in) const override {
    TG_CHECK(in.size() == count_, "[multi_tensor_cast] expected ", count_, " tensors, got ", in.size());
    std::vector<TensorMeta> out;
    out.reserve(in.size());
    for (const Tensor& t : in) out.push_back(contiguous_meta(t.sizes(), dtype_, t.device()));
    return out;
  }
  void eval(const TensorList& in, TensorList& out) const override {
    std::vector<bool> done(in.size(), false);
#ifdef TG_WITH_CUDA
    done = cuda::multi_tensor_cast(in, out);
#endif
    for (size_t i = 0; i < in.size(); ++i)
      if (!done[i]) copy_kernel(out[i], in[i]);
  }
  TensorList backward(const BackwardContext& ctx, const TensorList& grads) const override {
    TensorList g(count_);
    for (size_t i = 0; i < count_; ++i)
      if (ctx.needs_input_grad(i) && grads[i].defined()) g[i] = reduce_grad(grads[i], ctx.input_meta(i));
    return g;
  }
  SaveSpec saves() const override { return {.inputs = false}; }
  std::string attrs() const override {
    return "dtype=" + std::string(dtype_name(dtype_)) + ", count=" + std::to_string(count_);
  }

 private:
  DType dtype_;
  size_t count_;
};

}  // namespace

TensorList cast_all(const TensorList& xs, DType dtype) {
  if (xs.empty()) return {};
  return dispatch(multi_tensor_cast_op(dtype, xs.size()), xs);
}

OpPtr multi_tensor_cast_op(DType dtype, size_t count) { return std::make_shared<MultiTensorCastOp>(dtype, count); }

Tensor& copy_(Tensor& dst, const Tensor& src) {
  call_op<CopyOp>({dst, src}, dst.device() != src.device());
  return dst;
}

Tensor clone(const Tensor& x) { return call_op<CloneOp>({x}); }

Tensor contiguous(const Tensor& x) { return x.is_contiguous() ? x : clone(x); }

Tensor to(const Tensor& x, Device device, DType dtype) {
  if (x.device() == device && x.dtype() == dtype) return x;
  return call_op<ToCopyOp>({x}, device, dtype, x.device() != device);
}

Tensor& fill_(Tensor& x, Scalar value) {
  call_op<FillOp>({x}, value);
  return x;
}

Tensor& zero_(Tensor& x) { return fill_(x, 0); }

Tensor Tensor::contiguous() const { return tg::contiguous(*this); }
Tensor Tensor::clone() const { return tg::clone(*this); }
Tensor Tensor::to(Device device) const { return tg::to(*this, device, dtype()); }
Tensor Tensor::to(DType dtype) const { return tg::to(*this, device(), dtype); }
Tensor Tensor::to(Device device, DType dtype) const { return tg::to(*this, device, dtype); }
Tensor& Tensor::copy_(const Tensor& src) { return tg::copy_(*this, src); }
Tensor& Tensor::fill_(Scalar value) { return tg::fill_(*this, value); }
Tensor& Tensor::zero_() { return tg::zero_(*this); }

}  // namespace tg
