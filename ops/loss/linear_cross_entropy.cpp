// linear_cross_entropy: the forward op (chunks of logits -> per-row log-sum-exp and loss) and its
// backward op (chunks of logits recomputed -> softmax minus onehot -> the three products). Both run
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
#include "ops/loss/linear_cross_entropy_rows.h"
#include "ops/reduce/reduce.h"
#include "tensor/grad_mode.h"

namespace tg {
namespace {

constexpr const char* kForwardName = "linear_cross_entropy";
constexpr const char* kBackwardName = "linear_cross_entropy_backward";
// The logits of one chunk stay under this many bytes when the caller picks no chunk size.
constexpr int64_t kChunkBytes = int64_t{256} << 20;

// The dtype of the softmax arithmetic, the loss and the log-sum-exp: float32 for 16-bit products.
DType accumulation_dtype(DType t) { return t == kFloat16 || t == kBFloat16 ? kFloat32 : t; }

// Checks input [N, D], weight [V, D], bias [V] (or null) and target [N]; returns the device.
Device check_args(const char* op, const Tensor& x, const Tensor& w, const Tensor* b, const Tensor& target) {
  TG_CHECK(x.dim() == 2, "[", op, "] expected input of shape [N, D], got ", shape_str(x.sizes()));
  TG_CHECK(is_floating(x.dtype()), "[", op, "] expected a floating input, got ", dtype_name(x.dtype()));
  TG_CHECK(w.dim() == 2, "[", op, "] expected weight of shape [V, D], got ", shape_str(w.sizes()));
  TG_CHECK(w.dtype() == x.dtype(), "[", op, "] expected weight of the input's dtype ", dtype_name(x.dtype()), ", got ",
           dtype_name(w.dtype()));
  TG_CHECK(w.size(1) == x.size(1), "[", op, "] input ", shape_str(x.sizes()), " has ", x.size(1),
           " features but weight ", shape_str(w.sizes()), " expects ", w.size(1));
  TG_CHECK(w.size(0) >= 1, "[", op, "] expected at least one class (weight [V, D] with V >= 1), got weight ",
           shape_str(w.sizes()));
  if (b != nullptr) {
    TG_CHECK(b->dtype() == x.dtype(), "[", op, "] expected bias of the input's dtype ", dtype_name(x.dtype()),
             ", got ", dtype_name(b->dtype()));
    TG_CHECK(b->sizes() == Shape{w.size(0)}, "[", op, "] expected bias of shape [", w.size(0),
             "] (one per class), got ", shape_str(b->sizes()));
  }
  TG_CHECK(target.dtype() == kInt64, "[", op, "] expected target of dtype int64 (class indices), got ",
           dtype_name(target.dtype()));
  TG_CHECK(target.sizes() == Shape{x.size(0)}, "[", op, "] expected target of shape [", x.size(0), "] for input ",
           shape_str(x.sizes()), ", got ", shape_str(target.sizes()));
  return b != nullptr ? common_device(op, {x, w, *b, target}) : common_device(op, {x, w, target});
}

// Rows per chunk: the requested number, or as many as keep a chunk's logits under kChunkBytes.
int64_t chunk_rows_for(int64_t requested, int64_t rows, int64_t classes, DType dtype) {
  const int64_t most = std::max<int64_t>(rows, 1);
  if (requested > 0) return std::min(requested, most);
  return std::clamp<int64_t>(kChunkBytes / (classes * dtype_size(dtype)), 1, most);
}

// logits (contiguous [c, V]) = input[start : start + c] @ weight^T + bias.
void chunk_logits(const Tensor& logits, const Tensor& x, const Tensor& w, const Tensor* b, int64_t start, int64_t c) {
  BiasRef bias;
  if (b != nullptr) bias = BiasRef{b->raw_data(), 0, b->stride(0)};
  gemm_2d(logits, c, w.size(0), w.size(1), x.narrow(0, start, c), false, w, true, 1.0, b != nullptr ? &bias : nullptr,
          b != nullptr ? 1.0 : 0.0);
}

// The number of rows whose target is not ignore_index, as a 0-dim tensor of `dtype` on the device.
Tensor counted_rows(const Tensor& target, int64_t ignore_index, DType dtype) {
  return sum(ne(target, ignore_index).to(dtype));
}

// What the forward and the backward op are built with, and their shared attrs.
class LinearCrossEntropyBase : public Op {
 public:
  LinearCrossEntropyBase(bool has_bias, Reduction r, int64_t ignore_index, int64_t chunk_rows)
      : has_bias_(has_bias), reduction_(r), ignore_index_(ignore_index), chunk_rows_(chunk_rows) {}
  std::string attrs() const override {
    std::string s = std::string("reduction=") + reduction_name(reduction_);
    if (ignore_index_ != kDefaultIgnoreIndex) s += ", ignore_index=" + std::to_string(ignore_index_);
    if (chunk_rows_ != 0) s += ", chunk_rows=" + std::to_string(chunk_rows_);
    return s;
  }

 protected:
  bool has_bias_;
  Reduction reduction_;
  int64_t ignore_index_;
  int64_t chunk_rows_;
};

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
    // 16-bit weights over several chunks sum their chunks' products in float32.
    const bool wide_sum = dw.dtype() != acc && chunk < n;
    const Tensor dw_sum = wide_sum && d > 0 ? zeros({v, d}, {.dtype = acc, .device = x.device()}) : Tensor();
    const Tensor dw_part = dw_sum.defined() ? empty({v, d}, {.dtype = dw.dtype(), .device = x.device()}) : Tensor();
    Tensor db_sum = has_bias_ ? zeros({v}, {.dtype = acc, .device = x.device()}) : Tensor();
    const Tensor buffer = empty({chunk, v}, {.dtype = x.dtype(), .device = x.device()});
    for (int64_t start = 0; start < n; start += chunk) {
      const int64_t c = std::min(chunk, n - start);
      const Tensor dl = buffer.narrow(0, 0, c);
      chunk_logits(dl, x, w, b, start, c);
      linear_cross_entropy_rows_backward(dl, lse.narrow(0, start, c), target.narrow(0, start, c), ignore_index_,
                                         start, row_grad.numel() == 1 ? row_grad : row_grad.narrow(0, start, c));
      if (d > 0) {
        const Tensor xc = x.narrow(0, start, c);
        gemm_2d(dx.narrow(0, start, c), c, d, v, dl, false, w, false, 1.0, nullptr, 0.0);
        if (dw_sum.defined()) {
          gemm_2d(dw_part, v, d, c, dl, true, xc, false, 1.0, nullptr, 0.0);
          Tensor acc_w = dw_sum;
          acc_w.add_(dw_part.to(acc));
        } else {
          // dw (+)= dl^T @ xc: the first chunk writes, the others accumulate in place.
          Tensor keep_a, keep_b;
          Gemm g = gemm_2d_plan(dw, v, d, c, dl, true, xc, false, 1.0, keep_a, keep_b);
          g.beta = start > 0 ? 1.0 : 0.0;
          run_gemm(g);
        }
      }
      if (has_bias_) db_sum.add_(sum(dl, {0}, false, acc));
    }
    if (dw_sum.defined()) dw.copy_(dw_sum);
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
  auto op = std::make_shared<const LinearCrossEntropyOp>(b.defined(), o.reduction, o.ignore_index, o.chunk_rows);
  Tensor loss = (b.defined() ? dispatch(op, {x, w, b, target}) : dispatch(op, {x, w, target}))[0];
  // Without autocast, 16-bit parameters give a loss of their dtype, as cross_entropy(linear(...)).
  if (!autocast_on && loss.dtype() != x.dtype()) loss = loss.to(x.dtype());
  return loss;
}

}  // namespace tg
