// clamp with tensor bounds (PyTorch's clamp.Tensor, clamp_min.Tensor, clamp_max.Tensor): the forward
// runs the NaN-propagating maximum and minimum kernels, and the backward follows PyTorch's
// clamp_backward and clamp_backward_min_max, which differ from maximum/minimum's at ties.
#include "ops/core/dispatch.h"
#include "ops/elementwise/binary.h"
#include "ops/elementwise/compare.h"
#include "ops/elementwise/cpu/elementwise.h"
#include "ops/elementwise/elementwise.h"
#include "ops/elementwise/unary.h"
#include "ops/factory/factory.h"

#ifdef TG_WITH_CUDA
#include "ops/elementwise/cuda/elementwise.h"
#endif

namespace tg {
namespace {

const OpSchema kClampTensorSchema{"clamp", kElementwise};

// Inputs: x, then min if has_lo, then max if has_hi.
class ClampTensorOp final : public Op {
 public:
  ClampTensorOp(bool has_lo, bool has_hi) : has_lo_(has_lo), has_hi_(has_hi) {}

  const OpSchema& schema() const override { return kClampTensorSchema; }

  std::vector<TensorMeta> infer(const TensorList& in) const override {
    const DType r = result_dtype(in);
    if (in.size() == 2) return single_output(elementwise_meta("clamp", {&in[0], &in[1]}, r));
    return single_output(elementwise_meta("clamp", {&in[0], &in[1], &in[2]}, r));
  }

  void eval(const TensorList& in, TensorList& out) const override {
    Tensor& o = out[0];
    const DType compute = result_dtype(in);
    TensorList dev = in;
#ifdef TG_WITH_CUDA
    // A CPU 0-dim bound of a CUDA clamp is staged (rare enough to pay a copy).
    for (Tensor& t : dev)
      if (is_host_scalar_operand(t, o)) t = t.to(o.device());
#endif
    const Tensor& x = dev[0];
    if (has_lo_) run(BinaryKind::Maximum, compute, TensorIter::make(o, {&x, &dev[1]}));
    // With both bounds, min(max(x, lo), hi) in place: each element reads only its own position.
    if (has_hi_) run(BinaryKind::Minimum, compute, TensorIter::make(o, {has_lo_ ? &o : &x, &dev.back()}));
  }

  TensorList backward(const BackwardContext& ctx, const TensorList& grads) const override {
    const Tensor& g = grads[0];
    const Tensor x = ctx.input(0);
    const Tensor lo = has_lo_ ? ctx.input(1) : Tensor();
    const Tensor hi = has_hi_ ? ctx.input(has_lo_ ? 2 : 1) : Tensor();
    const Tensor zero = zeros({}, {.dtype = g.dtype(), .device = g.device()});
    TensorList gi(ctx_inputs());
    if (ctx.needs_input_grad(0)) {
      // Inside [min, max], ends included.
      Tensor inside;
      if (has_lo_) inside = ge(x, lo);
      if (has_hi_) inside = inside.defined() ? mul(inside, le(x, hi)) : le(x, hi);
      gi[0] = reduce_grad(where(inside, g, zero), ctx.input_meta(0));
    }
    if (has_lo_ && ctx.needs_input_grad(1)) {
      // Below min, and (with both bounds) min < max: where min > max the result is max's.
      const Tensor below = has_hi_ ? mul(lt(x, lo), lt(lo, hi)) : lt(x, lo);
      gi[1] = reduce_grad(where(below, g, zero), ctx.input_meta(1));
    }
    const size_t hi_index = has_lo_ ? 2 : 1;
    if (has_hi_ && ctx.needs_input_grad(hi_index)) {
      const Tensor above = has_lo_ ? add(gt(x, hi), lt(hi, lo)) : gt(x, hi);  // bool add is `or`
      gi[hi_index] = reduce_grad(where(above, g, zero), ctx.input_meta(hi_index));
    }
    return gi;
  }

 private:
  size_t ctx_inputs() const { return 1 + (has_lo_ ? 1 : 0) + (has_hi_ ? 1 : 0); }

  static DType result_dtype(const TensorList& in) {
    const DType r = in.size() == 2 ? result_type({&in[0], &in[1]}) : result_type({&in[0], &in[1], &in[2]});
    TG_CHECK(r != kBool, "[clamp] is not supported for bool tensors (got a ", dtype_name(r), " result)");
    return r;
  }

  static void run(BinaryKind kind, DType compute, const TensorIter& it) {
#ifdef TG_WITH_CUDA
    if (it.device.is_cuda()) {
      cuda::launch_binary(kind, compute, EwParams{}, it);
      return;
    }
#endif
    cpu::launch_binary(kind, compute, EwParams{}, it);
  }

  bool has_lo_, has_hi_;
};

}  // namespace

Tensor clamp(const Tensor& x, const Tensor& min, const Tensor& max) {
  TG_CHECK(min.defined() || max.defined(), "[clamp] at least one of 'min' or 'max' must not be None");
  TensorList in{x};
  if (min.defined()) in.push_back(min);
  if (max.defined()) in.push_back(max);
  return call_op<ClampTensorOp>(std::move(in), min.defined(), max.defined());
}

Tensor clamp_min(const Tensor& x, const Tensor& min) {
  TG_CHECK(min.defined(), "[clamp_min] expected a defined 'min' tensor");
  return clamp(x, min, Tensor());
}

Tensor clamp_max(const Tensor& x, const Tensor& max) {
  TG_CHECK(max.defined(), "[clamp_max] expected a defined 'max' tensor");
  return clamp(x, Tensor(), max);
}

}  // namespace tg
