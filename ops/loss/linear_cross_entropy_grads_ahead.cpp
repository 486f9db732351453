// The forward op that computes linear_cross_entropy's loss and gradients in one pass over the
// chunks of logits, and its backward op: each gradient times the loss's gradient, cast to its
// input's dtype (a float32 sum of 16-bit products is rounded once, there).
#include "ops/loss/linear_cross_entropy_grads_ahead.h"

#include <algorithm>

#include "ops/core/autocast.h"
#include "ops/core/dispatch.h"
#include "ops/elementwise/binary.h"
#include "ops/factory/factory.h"
#include "ops/loss/linear_cross_entropy_chunks.h"
#include "ops/loss/linear_cross_entropy_rows.h"
#include "ops/reduce/reduce.h"
#include "tensor/grad_mode.h"

#ifdef TG_WITH_CUDA
#include "ops/loss/cuda/linear_cross_entropy.h"
#endif

namespace tg {
namespace {

constexpr const char* kName = "linear_cross_entropy_grads_ahead";
constexpr const char* kScaleName = "linear_cross_entropy_grads_scale";
constexpr const char* kOnce = "cannot be differentiated twice: its gradients are computed in the forward pass";

// Inputs {grad, gradients...}; outputs each gradient times grad, in its dtype of `dtypes_`.
class GradsScaleOp final : public Op {
 public:
  explicit GradsScaleOp(std::vector<DType> dtypes) : dtypes_(std::move(dtypes)) {}
  const OpSchema& schema() const override {
    static const OpSchema s{.name = kScaleName};
    return s;
  }
  std::vector<TensorMeta> infer(const TensorList& in) const override {
    TG_CHECK(in.size() == dtypes_.size() + 1, "[", kScaleName, "] expected ", dtypes_.size() + 1, " inputs, got ",
             in.size());
    TG_CHECK(in[0].dim() == 0 && is_floating(in[0].dtype()), "[", kScaleName,
             "] expected the loss's gradient as a floating 0-dim tensor, got ", shape_str(in[0].sizes()), " of dtype ",
             dtype_name(in[0].dtype()));
    std::vector<TensorMeta> metas;
    for (size_t i = 0; i < dtypes_.size(); ++i) {
      TG_CHECK(in[i + 1].device() == in[0].device(), "[", kScaleName, "] expected gradients on ",
               in[0].device().str(), ", got ", in[i + 1].device().str());
      metas.push_back(contiguous_meta(in[i + 1].sizes(), dtypes_[i], in[0].device()));
    }
    return metas;
  }
  void eval(const TensorList& in, TensorList& out) const override {
    GradModeGuard no_grad(false);
    AutocastOffGuard no_autocast;
    for (size_t i = 0; i < out.size(); ++i) {
#ifdef TG_WITH_CUDA
      // One pass on CUDA: the product converted as it is written.
      if (out[i].is_cuda() && in[i + 1].is_contiguous() && in[0].dtype() == in[i + 1].dtype() &&
          cuda::scale_gradient(in[i + 1], in[0], out[i]))
        continue;
#endif
      Tensor o = out[i];
      o.copy_(mul(in[i + 1], in[0]));
    }
  }
  TensorList backward(const BackwardContext&, const TensorList&) const override {
    TG_FAIL("[", kName, "] ", kOnce);
  }
  std::string attrs() const override {
    std::string s = "dtypes=";
    for (DType d : dtypes_) s += std::string(dtype_name(d)) + ",";
    s.pop_back();
    return s;
  }

 private:
  std::vector<DType> dtypes_;
};

// Inputs {x [..., D], w, [b], target [rows]}; outputs {loss, [dx], [dw], [db]} (the wanted gradients
// for an upstream gradient of one, in the accumulation dtype).
class LinearCrossEntropyGradsAheadOp final : public lce::LinearCrossEntropyBase {
 public:
  LinearCrossEntropyGradsAheadOp(bool has_bias, Reduction r, int64_t ignore_index, int64_t chunk_rows,
                                 GradsAhead wanted)
      : LinearCrossEntropyBase(has_bias, r, ignore_index, chunk_rows), wanted_(wanted) {}
  const OpSchema& schema() const override {
    static const OpSchema s{.name = kName, .flags = kComputeIntensive};
    return s;
  }
  std::string attrs() const override {
    std::string s = LinearCrossEntropyBase::attrs() + ", grads=";
    if (wanted_.input) s += "input,";
    if (wanted_.weight) s += "weight,";
    if (wanted_.bias) s += "bias,";
    s.pop_back();
    return s;
  }
  std::vector<TensorMeta> infer(const TensorList& in) const override {
    TG_CHECK(in.size() == (has_bias_ ? 4u : 3u), "[", kName, "] expected ", has_bias_ ? 4 : 3, " inputs, got ",
             in.size());
    const Tensor& x = in[0];
    const Tensor& w = in[1];
    const Device dev = lce::check_args(kName, x, w, has_bias_ ? &in[2] : nullptr, in[has_bias_ ? 3 : 2], true);
    TG_CHECK(reduction_ != Reduction::None, "[", kName, "] expected a Mean or Sum reduction, got None");
    TG_CHECK(has_bias_ || !wanted_.bias, "[", kName, "] a bias gradient was asked for without a bias");
    TG_CHECK(wanted_.input || wanted_.weight || wanted_.bias, "[", kName,
             "] expected at least one gradient to compute (else linear_cross_entropy's plain forward serves)");
    const DType acc = lce::accumulation_dtype(x.dtype());
    std::vector<TensorMeta> metas{contiguous_meta({}, acc, dev)};
    if (wanted_.input) metas.push_back(contiguous_meta(x.sizes(), acc, dev));
    if (wanted_.weight) metas.push_back(contiguous_meta(w.sizes(), acc, dev));
    if (wanted_.bias) metas.push_back(contiguous_meta({w.size(0)}, acc, dev));
    return metas;
  }
  void eval(const TensorList& in, TensorList& out) const override {
    const Tensor& w = in[1];
    const Tensor* b = has_bias_ ? &in[2] : nullptr;
    const Tensor& target = in[has_bias_ ? 3 : 2];
    const int64_t d = w.size(1), v = w.size(0), n = target.size(0);
    const DType acc = out[0].dtype();
    GradModeGuard no_grad(false);
    AutocastOffGuard no_autocast;
    // Rows of x, and of its gradient (contiguous, so the flattening is a view).
    const Tensor x = in[0].dim() == 2 ? in[0] : in[0].reshape({n, d});
    size_t next = 1;
    const Tensor dx = wanted_.input ? out[next++].reshape({n, d}) : Tensor();
    const Tensor dw = wanted_.weight ? out[next++] : Tensor();
    Tensor db = wanted_.bias ? out[next++] : Tensor();
    if (db.defined()) db.zero_();
    const Tensor count = lce::counted_rows(target, ignore_index_, acc);
    // Each row's factor for an upstream gradient of one: one over the counted rows for Mean.
    const Tensor row_grad =
        reduction_ == Reduction::Mean ? rdiv(count, 1.0) : ones({}, {.dtype = acc, .device = x.device()});
    const Tensor row_loss = empty({n}, {.dtype = acc, .device = x.device()});
    if (n == 0 && dw.defined()) {
      Tensor z = dw;
      z.zero_();
    }
    if (n > 0) {
      const int64_t chunk = lce::chunk_rows_for(chunk_rows_, n, v, x.dtype());
      const Tensor buffer = empty({chunk, v}, {.dtype = x.dtype(), .device = x.device()});
      const Tensor lse = empty({chunk}, {.dtype = acc, .device = x.device()});
      for (int64_t start = 0; start < n; start += chunk) {
        const int64_t c = std::min(chunk, n - start);
        const Tensor logits = buffer.narrow(0, 0, c), lse_c = lse.narrow(0, 0, c);
        const Tensor target_c = target.narrow(0, start, c);
        lce::chunk_logits(logits, x, w, b, start, c);
        linear_cross_entropy_rows_forward_backward(logits, target_c, ignore_index_, start, lse_c,
                                                   row_loss.narrow(0, start, c), row_grad);
        lce::add_chunk_products(logits, x, w, start, dx, dw, db);
      }
    }
    // Mean over no counted row is 0 / 0 = NaN, as in PyTorch.
    Tensor total = sum(row_loss);
    if (reduction_ == Reduction::Mean) total = div(total, count);
    out[0].copy_(total);
  }
  SaveSpec saves() const override { return {.inputs = false, .outputs = true, .output_mask = ~1u}; }
  // The gradient outputs take no gradient (no zeros are made for them).
  bool needs_zero_filled_grads() const override { return false; }
  TensorList backward(const BackwardContext& ctx, const TensorList& grads) const override {
    for (size_t i = 1; i < grads.size(); ++i) TG_CHECK(!grads[i].defined(), "[", kName, "] ", kOnce);
    TensorList r(has_bias_ ? 4 : 3);
    if (!grads[0].defined() || grads.size() == 1) return r;
    TensorList in{grads[0]};
    std::vector<DType> dtypes;
    std::vector<size_t> of_input;
    size_t next = 1;
    const bool wanted[3] = {wanted_.input, wanted_.weight, wanted_.bias};
    for (size_t input = 0; input < 3; ++input) {
      if (!wanted[input]) continue;
      in.push_back(ctx.output(next++));
      dtypes.push_back(ctx.input_meta(input).dtype);
      of_input.push_back(input);
    }
    const TensorList g = dispatch(linear_cross_entropy_grads_scale_op(std::move(dtypes)), std::move(in));
    for (size_t k = 0; k < g.size(); ++k) r[of_input[k]] = g[k];
    return r;
  }

 private:
  GradsAhead wanted_;
};

}  // namespace

OpPtr linear_cross_entropy_grads_ahead_op(bool has_bias, Reduction reduction, int64_t ignore_index, int64_t chunk_rows,
                                          GradsAhead wanted) {
  return std::make_shared<const LinearCrossEntropyGradsAheadOp>(has_bias, reduction, ignore_index, chunk_rows, wanted);
}

OpPtr linear_cross_entropy_grads_scale_op(std::vector<DType> dtypes) {
  return std::make_shared<const GradsScaleOp>(std::move(dtypes));
}

Tensor linear_cross_entropy_grads_ahead(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& target,
                                        Reduction reduction, int64_t ignore_index, int64_t chunk_rows,
                                        GradsAhead wanted) {
  const OpPtr op = linear_cross_entropy_grads_ahead_op(b.defined(), reduction, ignore_index, chunk_rows, wanted);
  return (b.defined() ? dispatch(op, {x, w, b, target}) : dispatch(op, {x, w, target}))[0];
}

}  // namespace tg
