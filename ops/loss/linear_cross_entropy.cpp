// linear_cross_entropy: the forward op (chunks of logits -> per-row log-sum-exp and loss) and its
// backward op (chunks of logits recomputed -> softmax minus onehot -> the three products), and the
// choice of the op that computes the gradients in the forward instead. Both run
// their matrix products through the shared BLAS plans of ops/linalg/matmul_kernels.h and the per-row steps
// of ops/loss/linear_cross_entropy_rows.h; the few small reductions (the loss's sum, Mean's count) are
// ordinary ops run inside the kernel with autograd and autocast off. Nothing reads the targets on
// the host on CUDA, so the ops capture into CUDA graphs.
#include "ops/loss/linear_cross_entropy.h"

#include <algorithm>
#include <string>

#include "ops/core/autocast.h"
#include "ops/core/dispatch.h"
#include "ops/elementwise/binary.h"
#include "ops/elementwise/compare.h"
#include "ops/factory/factory.h"
#include "ops/linalg/matmul_kernels.h"
#include "ops/loss/linear_cross_entropy_chunks.h"
#include "ops/loss/linear_cross_entropy_grads_ahead.h"
#include "ops/loss/linear_cross_entropy_rows.h"
#include "ops/reduce/reduce.h"
#include "tensor/grad_mode.h"

namespace tg {
namespace {

using lce::accumulation_dtype;
using lce::check_args;
using lce::chunk_logits;
using lce::chunk_rows_for;
using lce::counted_rows;
using lce::LinearCrossEntropyBase;

constexpr const char* kForwardName = "linear_cross_entropy";
constexpr const char* kBackwardName = "linear_cross_entropy_backward";

// The gradients w.r.t. input, weight (and bias) from the loss's gradient, the inputs and the saved
// log-sum-exp: inputs {grad, x, w, [b], target, lse}. Not differentiable itself.
class LinearCrossEntropyBackwardOp final : public LinearCrossEntropyBase {
 public:
  using LinearCrossEntropyBase::LinearCrossEntropyBase;
  const OpSchema& schema() const override {
    static const OpSchema s{.name = kBackwardName, .flags = kComputeIntensive};
    return s;
  }
  std::vector<TensorMeta> infer(const TensorList& in) const override {
    TG_CHECK(in.size() == (has_bias_ ? 6u : 5u), "[", kBackwardName, "] expected ", has_bias_ ? 6 : 5,
             " inputs, got ", in.size());
    const Tensor& grad = in[0];
    const Tensor& x = in[1];
    const Tensor& w = in[2];
    const Device dev = check_args(kBackwardName, x, w, has_bias_ ? &in[3] : nullptr, in[has_bias_ ? 4 : 3]);
    const Tensor& lse = in[has_bias_ ? 5 : 4];
    const DType acc = accumulation_dtype(x.dtype());
    const Shape grad_shape = reduction_ == Reduction::None ? Shape{x.size(0)} : Shape{};
    TG_CHECK(grad.sizes() == grad_shape && grad.dtype() == acc, "[", kBackwardName, "] expected grad_output ",
             shape_str(grad_shape), " of dtype ", dtype_name(acc), ", got ", shape_str(grad.sizes()), " of dtype ",
             dtype_name(grad.dtype()));
    TG_CHECK(lse.sizes() == Shape{x.size(0)} && lse.dtype() == acc, "[", kBackwardName,
             "] expected the saved log-sum-exp [", x.size(0), "] of dtype ", dtype_name(acc), ", got ",
             shape_str(lse.sizes()), " of dtype ", dtype_name(lse.dtype()));
    std::vector<TensorMeta> metas{contiguous_meta(x.sizes(), x.dtype(), dev), contiguous_meta(w.sizes(), w.dtype(), dev)};
    if (has_bias_) metas.push_back(contiguous_meta({w.size(0)}, w.dtype(), dev));
    return metas;
  }
  void eval(const TensorList& in, TensorList& out) const override {
    const Tensor& grad = in[0];
    const Tensor& x = in[1];
    const Tensor& w = in[2];
    const Tensor* b = has_bias_ ? &in[3] : nullptr;
    const Tensor& target = in[has_bias_ ? 4 : 3];
    const Tensor& lse = in[has_bias_ ? 5 : 4];
    const int64_t n = x.size(0), d = x.size(1), v = w.size(0);
    const DType acc = lse.dtype();
    GradModeGuard no_grad(false);
    AutocastOffGuard no_autocast;
    Tensor dx = out[0], dw = out[1];
    if (n == 0) {
      dw.zero_();
      if (has_bias_) out[2].zero_();
      return;
    }
    // Each row's factor: its gradient (one for all rows when reduced), over the counted rows for Mean.
    Tensor row_grad = grad.to(acc);
    if (reduction_ == Reduction::Mean) row_grad = div(row_grad, counted_rows(target, ignore_index_, acc));
    row_grad = row_grad.contiguous();
    const int64_t chunk = chunk_rows_for(chunk_rows_, n, v, x.dtype());
    // 16-bit weights over several chunks sum their chunks' products in float32, inside the products.
    const Tensor dw_sum = dw.dtype() != acc && chunk < n ? empty({v, d}, {.dtype = acc, .device = x.device()}) : dw;
    const Tensor db_sum = has_bias_ ? zeros({v}, {.dtype = acc, .device = x.device()}) : Tensor();
    const Tensor buffer = empty({chunk, v}, {.dtype = x.dtype(), .device = x.device()});
    for (int64_t start = 0; start < n; start += chunk) {
      const int64_t c = std::min(chunk, n - start);
      const Tensor dl = buffer.narrow(0, 0, c);
      chunk_logits(dl, x, w, b, start, c);
      linear_cross_entropy_rows_backward(dl, lse.narrow(0, start, c), target.narrow(0, start, c), ignore_index_,
                                         start, row_grad.numel() == 1 ? row_grad : row_grad.narrow(0, start, c));
      lce::add_chunk_products(dl, x, w, start, dx, dw_sum, db_sum);
    }
    if (!dw_sum.is_same(dw)) dw.copy_(dw_sum);
    if (has_bias_) out[2].copy_(db_sum);
  }
};

// The loss and each row's log-sum-exp (kept for the backward, never a user's tensor): inputs
// {x, w, [b], target}.
class LinearCrossEntropyOp final : public LinearCrossEntropyBase {
 public:
  using LinearCrossEntropyBase::LinearCrossEntropyBase;
  const OpSchema& schema() const override {
    static const OpSchema s{.name = kForwardName, .flags = kComputeIntensive};
    return s;
  }
  std::vector<TensorMeta> infer(const TensorList& in) const override {
    TG_CHECK(in.size() == (has_bias_ ? 4u : 3u), "[", kForwardName, "] expected ", has_bias_ ? 4 : 3, " inputs, got ",
             in.size());
    const Tensor& x = in[0];
    const Device dev = check_args(kForwardName, x, in[1], has_bias_ ? &in[2] : nullptr, in[has_bias_ ? 3 : 2]);
    const DType acc = accumulation_dtype(x.dtype());
    const Shape loss_shape = reduction_ == Reduction::None ? Shape{x.size(0)} : Shape{};
    return {contiguous_meta(loss_shape, acc, dev), contiguous_meta({x.size(0)}, acc, dev)};
  }
  void eval(const TensorList& in, TensorList& out) const override {
    const Tensor& x = in[0];
    const Tensor& w = in[1];
    const Tensor* b = has_bias_ ? &in[2] : nullptr;
    const Tensor& target = in[has_bias_ ? 3 : 2];
    const int64_t n = x.size(0), v = w.size(0);
    GradModeGuard no_grad(false);
    AutocastOffGuard no_autocast;
    const Tensor row_loss =
        reduction_ == Reduction::None ? out[0] : empty({n}, {.dtype = out[0].dtype(), .device = x.device()});
    if (n > 0) {
      const int64_t chunk = chunk_rows_for(chunk_rows_, n, v, x.dtype());
      const Tensor buffer = empty({chunk, v}, {.dtype = x.dtype(), .device = x.device()});
      for (int64_t start = 0; start < n; start += chunk) {
        const int64_t c = std::min(chunk, n - start);
        const Tensor logits = buffer.narrow(0, 0, c);
        chunk_logits(logits, x, w, b, start, c);
        linear_cross_entropy_rows_forward(logits, target.narrow(0, start, c), ignore_index_, start,
                                          out[1].narrow(0, start, c), row_loss.narrow(0, start, c));
      }
    }
    if (reduction_ == Reduction::None) return;
    Tensor total = sum(row_loss);
    // Mean over no counted row is 0 / 0 = NaN, as in PyTorch.
    if (reduction_ == Reduction::Mean) total = div(total, counted_rows(target, ignore_index_, total.dtype()));
    out[0].copy_(total);
  }
  SaveSpec saves() const override { return {.inputs = true, .outputs = true, .output_mask = 0b10}; }
  // The log-sum-exp output takes no gradient (no zeros are made for it).
  bool needs_zero_filled_grads() const override { return false; }
  TensorList backward(const BackwardContext& ctx, const TensorList& grads) const override {
    TG_CHECK(!grads[1].defined(), "[", kForwardName, "] its log-sum-exp output is internal and takes no gradient");
    TensorList r(has_bias_ ? 4 : 3);
    if (!grads[0].defined()) return r;
    TensorList in{grads[0], ctx.input(0), ctx.input(1)};
    if (has_bias_) in.push_back(ctx.input(2));
    in.push_back(ctx.input(has_bias_ ? 3 : 2));
    in.push_back(ctx.output(1));
    const TensorList g = dispatch(
        std::make_shared<const LinearCrossEntropyBackwardOp>(has_bias_, reduction_, ignore_index_, chunk_rows_), in);
    for (size_t i = 0; i < g.size(); ++i) r[i] = g[i];
    return r;
  }
};

}  // namespace

Tensor linear_cross_entropy(const Tensor& input, const Tensor& weight, const Tensor& bias, const Tensor& target,
                            const LinearCrossEntropyOptions& o) {
  TG_CHECK(o.chunk_rows >= 0, "[", kForwardName, "] expected chunk_rows >= 0 (0 picks one), got ", o.chunk_rows);
  TG_CHECK(input.defined() && weight.defined() && target.defined(), "[", kForwardName,
           "] expected defined input, weight and target");
  // The products are on autocast's low-precision list (as linear); the loss on its float32 list.
  const bool autocast_on = autocast::active_for(input);
  const Tensor x = autocast::to_low(input), w = autocast::to_low(weight), b = autocast::to_low(bias);
  const GradsAhead wanted{.input = x.requires_grad(), .weight = w.requires_grad(),
                          .bias = b.defined() && b.requires_grad()};
  Tensor loss;
  if (o.gradients_in_forward && o.reduction != Reduction::None && is_grad_enabled() &&
      (wanted.input || wanted.weight || wanted.bias)) {
    check_args(kForwardName, x, w, b.defined() ? &b : nullptr, target);
    loss = linear_cross_entropy_grads_ahead(x, w, b, target, o.reduction, o.ignore_index, o.chunk_rows, wanted);
  } else {
    auto op = std::make_shared<const LinearCrossEntropyOp>(b.defined(), o.reduction, o.ignore_index, o.chunk_rows);
    loss = (b.defined() ? dispatch(op, {x, w, b, target}) : dispatch(op, {x, w, target}))[0];
  }
  // Without autocast, 16-bit parameters give a loss of their dtype, as cross_entropy(linear(...)).
  if (!autocast_on && loss.dtype() != x.dtype()) loss = loss.to(x.dtype());
  return loss;
}

}  // namespace tg
