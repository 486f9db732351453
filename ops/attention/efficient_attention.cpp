// The memory-efficient attention ops, efficient_attention (O and the log-sum-exp of each score row)
// and efficient_attention_backward (dq, dk, dv), and the choice scaled_dot_product_attention makes
// for them. A trace sees one node each way.
#include "ops/attention/efficient_attention.h"

#include <limits>
#include <sstream>

#include "ops/attention/efficient_attention_kernels.h"
#include "ops/attention/flash_attention.h"
#include "ops/attention/flash_attention_kernels.h"
#include "ops/core/dispatch.h"
#include "ops/factory/factory.h"
#include "tensor/shape.h"

namespace tg {
namespace {

constexpr int64_t kMaxHeadDim = 128;
// Under SdpaKernel::kAuto, heads with fewer scores than this compose instead: there cuBLAS's batched
// products beat the tile loop (transformer_lm's 64 x 64 heads ran 7% slower on the kernels) and the
// scores are small anyway.
constexpr int64_t kMinAutoScores = 256 * 256;

// The operand with a unit stride along its last dim (what the kernels read), copied only if needed.
Tensor unit_last_stride(const Tensor& t) { return t.stride(-1) == 1 ? t : t.contiguous(); }

void check_operands(const char* op, const Tensor& q, const Tensor& k, const Tensor& v) {
  TG_CHECK(q.dtype() == kFloat32 || q.dtype() == kFloat64, "[", op, "] takes float32 or float64 operands, got ",
           dtype_name(q.dtype()));
  TG_CHECK(k.dtype() == q.dtype() && v.dtype() == q.dtype() && k.device() == q.device() && v.device() == q.device(),
           "[", op, "] expected query, key and value of one dtype on one device, got ", dtype_name(q.dtype()), ", ",
           dtype_name(k.dtype()), " and ", dtype_name(v.dtype()));
  TG_CHECK(q.dim() == 4 && k.dim() == 4 && v.dim() == 4 && k.size(0) == q.size(0) && v.size(0) == q.size(0) &&
               k.size(1) == q.size(1) && v.size(1) == q.size(1) && k.size(3) == q.size(3) && v.size(2) == k.size(2),
           "[", op, "] expected query [B, H, L, D], key [B, H, S, D] and value [B, H, S, Dv], got ",
           shape_str(q.sizes()), ", ", shape_str(k.sizes()), " and ", shape_str(v.sizes()));
  TG_CHECK(q.size(3) <= kMaxHeadDim && v.size(3) <= kMaxHeadDim, "[", op, "] takes head dims up to ", kMaxHeadDim,
           ", got ", q.size(3), " and ", v.size(3));
}

std::string params_str(double scale, bool causal) {
  std::ostringstream s;
  s << "scale=" << scale << ", causal=" << (causal ? "true" : "false");
  return s.str();
}

// Inputs q, k, v, O, dO, lse; outputs dq, dk, dv, each laid out as [B, T, H, D].
class EfficientAttentionBackwardOp final : public Op {
 public:
  EfficientAttentionBackwardOp(double scale, bool causal) : scale_(scale), causal_(causal) {}
  const OpSchema& schema() const override {
    static const OpSchema s{.name = "efficient_attention_backward", .flags = kComputeIntensive};
    return s;
  }
  std::vector<TensorMeta> infer(const TensorList& in) const override {
    TG_CHECK(in.size() == 6, "[efficient_attention_backward] expected q, k, v, O, dO and the log-sum-exp, got ",
             in.size(), " operands");
    check_operands("efficient_attention_backward", in[0], in[1], in[2]);
    const Tensor& q = in[0];
    const Shape o{q.size(0), q.size(1), q.size(2), in[2].size(3)};
    TG_CHECK(in[3].sizes() == o && in[4].sizes() == o && in[3].dtype() == q.dtype() && in[4].dtype() == q.dtype(),
             "[efficient_attention_backward] expected O and dO as ", dtype_name(q.dtype()), " ", shape_str(o),
             ", got ", shape_str(in[3].sizes()), " and ", shape_str(in[4].sizes()));
    const Shape rows{q.size(0), q.size(1), q.size(2)};
    TG_CHECK(in[5].sizes() == rows && in[5].dtype() == q.dtype(), "[efficient_attention_backward] expected the ",
             "log-sum-exp as ", dtype_name(q.dtype()), " ", shape_str(rows), ", got ", dtype_name(in[5].dtype()), " ",
             shape_str(in[5].sizes()));
    std::vector<TensorMeta> out;
    for (size_t i = 0; i < 3; ++i) out.push_back(bshd_meta(in[i].sizes(), q.dtype(), q.device()));
    return out;
  }
  void eval(const TensorList& in, TensorList& out) const override {
#ifdef TG_WITH_CUDA
    if (in[0].is_cuda()) {
      if (in[0].size(2) == 0 || in[1].size(2) == 0) {  // no rows or no keys: nothing flows back
        for (Tensor& g : out) g.zero_();
        return;
      }
      const Tensor delta = empty({in[0].size(0), in[0].size(1), in[0].size(2)},
                                 {.dtype = in[0].dtype(), .device = in[0].device()});
      return cuda::efficient_attention_backward(in[0], in[1], in[2], in[3], in[4], in[5], scale_, causal_, delta,
                                                out[0], out[1], out[2]);
    }
#endif
    (void)out;
    TG_FAIL("[efficient_attention_backward] runs on CUDA tensors only, got ", in[0].device().str());
  }
  SaveSpec saves() const override { return {false, false}; }
  std::string attrs() const override { return params_str(scale_, causal_); }

 private:
  double scale_;
  bool causal_;
};

class EfficientAttentionOp final : public Op {
 public:
  EfficientAttentionOp(double scale, bool causal) : scale_(scale), causal_(causal) {}
  const OpSchema& schema() const override {
    static const OpSchema s{.name = "efficient_attention", .flags = kComputeIntensive};
    return s;
  }
  std::vector<TensorMeta> infer(const TensorList& in) const override {
    TG_CHECK(in.size() == 3, "[efficient_attention] expected q, k and v, got ", in.size(), " operands");
    check_operands("efficient_attention", in[0], in[1], in[2]);
    const Tensor& q = in[0];
    const Shape o{q.size(0), q.size(1), q.size(2), in[2].size(3)};
    return {bshd_meta(o, q.dtype(), q.device()),
            contiguous_meta({q.size(0), q.size(1), q.size(2)}, q.dtype(), q.device())};
  }
  void eval(const TensorList& in, TensorList& out) const override {
#ifdef TG_WITH_CUDA
    if (in[0].is_cuda()) {
      if (out[0].numel() == 0 && out[1].numel() == 0) return;
      if (in[1].size(2) == 0) {  // no keys: zero weights, as the composed path gives
        out[0].zero_();
        out[1].fill_(-std::numeric_limits<double>::infinity());
        return;
      }
      return cuda::efficient_attention_forward(in[0], in[1], in[2], scale_, causal_, out[0], out[1]);
    }
#endif
    (void)out;
    TG_FAIL("[efficient_attention] runs on CUDA tensors only, got ", in[0].device().str());
  }
  SaveSpec saves() const override { return {.inputs = true, .outputs = true}; }
  bool needs_zero_filled_grads() const override { return false; }
  TensorList backward(const BackwardContext& ctx, const TensorList& grads) const override {
    TensorList result(3);
    if (!grads[0].defined()) return result;  // only the log-sum-exp was used: it carries no gradient
    TensorList in{ctx.input(0),  ctx.input(1),  ctx.input(2), ctx.output(0), unit_last_stride(grads[0]),
                  ctx.output(1)};
    const TensorList g = dispatch(std::make_shared<const EfficientAttentionBackwardOp>(scale_, causal_), std::move(in));
    for (size_t i = 0; i < 3; ++i)
      if (ctx.needs_input_grad(i)) result[i] = g[i];
    return result;
  }
  std::string attrs() const override { return params_str(scale_, causal_); }

 private:
  double scale_;
  bool causal_;
};

}  // namespace

std::string efficient_attention_blocker(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask,
                                        double dropout_p) {
  std::ostringstream why;
  if (!q.device().is_cuda()) return "it runs on CUDA tensors, got the query on " + q.device().str();
  if (q.dtype() != kFloat32 && q.dtype() != kFloat64)
    return std::string("it takes float32 or float64 operands, got ") + std::string(dtype_name(q.dtype()));
  if (std::string why_not = attention_operands_blocker(q, k, v); !why_not.empty()) return why_not;
  if (mask.defined()) return "a mask (only causal masking is built in)";
  if (dropout_p > 0.0) return "dropout";
  if (q.size(-1) > kMaxHeadDim || v.size(-1) > kMaxHeadDim) {
    why << "head dims up to " << kMaxHeadDim << ", got " << q.size(-1) << " and " << v.size(-1);
    return why.str();
  }
  if (q.numel() == 0 || k.numel() == 0 || v.numel() == 0) return "empty operands";
  return {};
}

std::optional<Tensor> memory_efficient_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                                 const Tensor& attn_mask, double dropout_p, bool is_causal,
                                                 double scale) {
  const SdpaKernel mode = sdpa_kernel();
  if (mode == SdpaKernel::kComposed) return std::nullopt;
  if (!efficient_attention_blocker(q, k, v, attn_mask, dropout_p).empty()) return std::nullopt;
  if (mode == SdpaKernel::kAuto && q.size(-2) * k.size(-2) < kMinAutoScores) return std::nullopt;
  const bool three = q.dim() == 3;
  auto four = [&](const Tensor& t) { return three ? t.unsqueeze(1) : t; };
  const Tensor out = efficient_attention(four(q), four(k), four(v), scale, is_causal);
  return three ? out.squeeze(1) : out;
}

Tensor efficient_attention(const Tensor& q, const Tensor& k, const Tensor& v, double scale, bool is_causal) {
  return dispatch(std::make_shared<const EfficientAttentionOp>(scale, is_causal),
                  {unit_last_stride(q), unit_last_stride(k), unit_last_stride(v)})[0];
}

}  // namespace tg
