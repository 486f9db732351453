// The fused attention ops, flash_attention (O and the float32 logsumexp of each score row) and
// flash_attention_backward (dq, dk, dv from q, k, v, O, dO and the logsumexp), and the choice that
// scaled_dot_product_attention makes between them and the composed path. A trace sees one node
// each way; nothing of size L x S is kept (the saved state is O and the logsumexp).
#include "ops/attention/flash_attention.h"

#include <cmath>
#include <limits>
#include <sstream>

#include "ops/attention/flash_attention_kernels.h"
#include "ops/core/dispatch.h"
#include "ops/core/precision.h"
#include "ops/elementwise/binary.h"
#include "ops/elementwise/compare.h"
#include "ops/elementwise/copy.h"
#include "ops/factory/factory.h"
#include "ops/index/masking.h"
#include "ops/random/random.h"
#include "ops/reduce/reduce.h"
#include "ops/shape/pad.h"
#include "tensor/grad_mode.h"
#include "tensor/shape.h"

namespace tg {
namespace {

thread_local SdpaKernel t_kernel = SdpaKernel::kAuto;

constexpr int64_t kMaxHeadDim = 128;
// cuDNN reads 16-byte aligned rows: strides and offsets in multiples of 8 16-bit elements.
constexpr int64_t kAlign = 8;

bool aligned_layout(const TensorMeta& m) {
  if (m.strides.back() != 1 || m.offset % kAlign != 0) return false;
  for (size_t i = 0; i + 1 < m.strides.size(); ++i)
    if (m.sizes[i] != 1 && m.strides[i] % kAlign != 0) return false;
  return true;
}

// The operand as cuDNN reads it: its own layout when aligned, a contiguous copy otherwise.
Tensor aligned(const Tensor& t) { return aligned_layout(meta_of(t)) ? t : t.contiguous(); }
TensorMeta aligned_meta(const Tensor& t) {
  const TensorMeta m = meta_of(t);
  return aligned_layout(m) ? m : contiguous_meta(m.sizes, m.dtype, m.device);
}

// Equal strides wherever they matter (dims of size 1 have no stride to speak of).
bool same_layout(const Shape& sizes, const Shape& a, const Shape& b) {
  for (size_t i = 0; i < sizes.size(); ++i)
    if (sizes[i] != 1 && a[i] != b[i]) return false;
  return true;
}

int64_t round_up(int64_t n, int64_t m) { return (n + m - 1) / m * m; }

// Layout of the additive bias handed to cuDNN: [b, h, L, S] with rows padded to the alignment.
TensorMeta bias_meta(int64_t b, int64_t h, int64_t L, int64_t S, DType dtype, Device device) {
  const int64_t row = round_up(S, kAlign);
  return {.sizes = {b, h, L, S}, .strides = {h * L * row, L * row, row, 1}, .offset = 0, .dtype = dtype,
          .device = device};
}

void check_operands(const char* op, const TensorList& in, size_t first_16bit_count) {
  const Tensor& q = in[0];
  TG_CHECK(q.dim() == 4, "[", op, "] expected query of shape [B, H, L, D], got ", shape_str(q.sizes()));
  TG_CHECK(is_low_precision(q.dtype()), "[", op, "] takes float16 or bfloat16 operands, got ", dtype_name(q.dtype()));
  for (size_t i = 0; i < first_16bit_count; ++i) {
    TG_CHECK(in[i].dtype() == q.dtype() && in[i].device() == q.device(), "[", op, "] expected operand ", i, " as ",
             dtype_name(q.dtype()), " on ", q.device().str(), ", got ", dtype_name(in[i].dtype()), " on ",
             in[i].device().str());
  }
  const Tensor &k = in[1], &v = in[2];
  TG_CHECK(k.dim() == 4 && v.dim() == 4 && k.size(0) == q.size(0) && v.size(0) == q.size(0) && k.size(1) == q.size(1) &&
               v.size(1) == q.size(1) && k.size(3) == q.size(3) && v.size(2) == k.size(2),
           "[", op, "] expected query [B, H, L, D], key [B, H, S, D] and value [B, H, S, Dv], got ",
           shape_str(q.sizes()), ", ", shape_str(k.sizes()), " and ", shape_str(v.sizes()));
}

class FlashAttentionOp final : public Op {
 public:
  // With dropout, reserves `blocks` Philox blocks of the global generator for cuDNN's masks.
  FlashAttentionOp(FlashAttentionParams p, bool has_bias, uint64_t blocks) : p_(p), has_bias_(has_bias), blocks_(blocks) {
    if (p_.dropout_p > 0.0) state_ = Generator::global().reserve(blocks_);
  }
  const OpSchema& schema() const override {
    static const OpSchema s{.name = "flash_attention", .flags = kComputeIntensive};
    static const OpSchema random{.name = "flash_attention", .flags = kComputeIntensive | kRandom};
    return p_.dropout_p > 0.0 ? random : s;
  }
  std::shared_ptr<const Op> redraw() const override {
    return std::make_shared<const FlashAttentionOp>(p_, has_bias_, blocks_);
  }
  std::vector<TensorMeta> infer(const TensorList& in) const override {
    TG_CHECK(in.size() == (has_bias_ ? 4u : 3u), "[flash_attention] expected q, k, v", has_bias_ ? " and a bias" : "",
             ", got ", in.size(), " operands");
    check_operands("flash_attention", in, in.size());
    const Tensor& q = in[0];
    const int64_t B = q.size(0), H = q.size(1), L = q.size(2), S = in[1].size(2);
    if (in.size() == 4) {
      const Tensor& b = in[3];
      TG_CHECK(b.dim() == 4 && (b.size(0) == 1 || b.size(0) == B) && (b.size(1) == 1 || b.size(1) == H) &&
                   b.size(2) == L && b.size(3) == S,
               "[flash_attention] expected a bias of shape [", B, "|1, ", H, "|1, ", L, ", ", S, "], got ",
               shape_str(b.sizes()));
    }
    const Shape o{B, H, L, in[2].size(3)};
    std::vector<TensorMeta> out;
    out.push_back(bshd_meta(o, q.dtype(), q.device()));
    out.push_back(contiguous_meta({B, H, L, 1}, kFloat32, q.device()));
    // cuDNN's Philox seed and offset, which the backward reads to drop what the forward dropped.
    out.push_back(contiguous_meta({p_.dropout_p > 0.0 ? 2 : 0}, kInt64, q.device()));
    return out;
  }
  void eval(const TensorList& in, TensorList& out) const override {
#ifdef TG_WITH_CUDA
    if (in[0].is_cuda()) {
      for (const Tensor& t : in)
        TG_CHECK(aligned_layout(meta_of(t)), "[flash_attention] internal error: operand strides ",
                 shape_str(t.strides()), " are not aligned for cuDNN");
      if (p_.dropout_p > 0.0) cuda::write_philox_state(out[2], state_, blocks_);
      return cuda::flash_attention_forward(in[0], in[1], in[2], in.size() == 4 ? in[3] : Tensor(), p_, out[2],
                                           out[0], out[1]);
    }
#endif
    (void)out;
    TG_FAIL("[flash_attention] runs on CUDA tensors only, got ", in[0].device().str());
  }
  SaveSpec saves() const override { return {.inputs = true, .outputs = true}; }
  bool needs_zero_filled_grads() const override { return false; }
  TensorList backward(const BackwardContext& ctx, const TensorList& grads) const override;
  std::string attrs() const override {
    std::ostringstream s;
    s << "scale=" << p_.scale << ", causal=" << (p_.causal ? "true" : "false") << ", bias=" << (has_bias_ ? "true" : "false");
    if (p_.dropout_p > 0.0) s << ", dropout_p=" << p_.dropout_p << ", seed=" << state_.seed << ", offset=" << state_.offset;
    return s.str();
  }

 private:
  FlashAttentionParams p_;
  bool has_bias_;
  uint64_t blocks_;
  PhiloxState state_;
};

// Inputs: q, k, v, O, dO (laid out as O), logsumexp, the forward's Philox state (empty without
// dropout), optional bias; outputs dq, dk, dv laid out as O, or (packed) one [B, L, 3 * H * D]
// tensor holding them side by side in each row: the gradient of the projection that q, k and v were
// split from, written by cuDNN in place of the cat that would join them.
class FlashAttentionBackwardOp final : public Op {
 public:
  FlashAttentionBackwardOp(FlashAttentionParams p, bool packed) : p_(p), packed_(packed) {}
  const OpSchema& schema() const override {
    static const OpSchema s{.name = "flash_attention_backward", .flags = kComputeIntensive};
    static const OpSchema packed{.name = "flash_attention_backward_packed", .flags = kComputeIntensive};
    return packed_ ? packed : s;
  }
  std::vector<TensorMeta> infer(const TensorList& in) const override {
    TG_CHECK(in.size() == 7 || in.size() == 8, "[flash_attention_backward] expected q, k, v, O, dO, the logsumexp, ",
             "the Philox state and an optional bias, got ", in.size(), " operands");
    TG_CHECK(in[6].dtype() == kInt64 && in[6].numel() == (p_.dropout_p > 0.0 ? 2 : 0), "[flash_attention_backward] ",
             "expected the forward's Philox state, got ", dtype_name(in[6].dtype()), " ", shape_str(in[6].sizes()));
    check_operands("flash_attention_backward", in, 5);
    const Tensor& q = in[0];
    const Shape o{q.size(0), q.size(1), q.size(2), in[2].size(3)};
    TG_CHECK(in[3].sizes() == o && in[4].sizes() == o, "[flash_attention_backward] expected O and dO of shape ",
             shape_str(o), ", got ", shape_str(in[3].sizes()), " and ", shape_str(in[4].sizes()));
    TG_CHECK(same_layout(o, in[4].strides(), bshd_strides(o)), "[flash_attention_backward] expected dO laid out as O (strides ",
             shape_str(bshd_strides(o)), "), got ", shape_str(in[4].strides()));
    const Shape st{q.size(0), q.size(1), q.size(2), 1};
    TG_CHECK(in[5].dtype() == kFloat32 && in[5].sizes() == st, "[flash_attention_backward] expected the ",
             "logsumexp as float32 ", shape_str(st), ", got ", dtype_name(in[5].dtype()), " ",
             shape_str(in[5].sizes()));
    if (packed_) {
      TG_CHECK(in[1].sizes() == q.sizes() && in[2].sizes() == q.sizes(), "[flash_attention_backward_packed] ",
               "expected q, k and v of one shape, got ", shape_str(q.sizes()), ", ", shape_str(in[1].sizes()), " and ",
               shape_str(in[2].sizes()));
      return {contiguous_meta({q.size(0), q.size(2), 3 * q.size(1) * q.size(3)}, q.dtype(), q.device())};
    }
    std::vector<TensorMeta> out;
    for (size_t i = 0; i < 3; ++i) out.push_back(bshd_meta(in[i].sizes(), q.dtype(), q.device()));
    return out;
  }
  void eval(const TensorList& in, TensorList& out) const override {
#ifdef TG_WITH_CUDA
    if (in[0].is_cuda()) {
      const Tensor bias = in.size() == 8 ? in[7] : Tensor();
      if (!packed_)
        return cuda::flash_attention_backward(in[0], in[1], in[2], in[3], in[4], in[5], bias, in[6], p_, out[0],
                                              out[1], out[2]);
      // dq, dk and dv as [B, H, L, D] views of the packed rows, at offsets 0, H * D and 2 * H * D.
      const int64_t B = in[0].size(0), H = in[0].size(1), L = in[0].size(2), D = in[0].size(3), row = 3 * H * D;
      auto piece = [&](int64_t i) {
        return out[0].as_strided({B, H, L, D}, {L * row, D, row, 1}, out[0].storage_offset() + i * H * D);
      };
      return cuda::flash_attention_backward(in[0], in[1], in[2], in[3], in[4], in[5], bias, in[6], p_, piece(0),
                                            piece(1), piece(2));
    }
#endif
    (void)out;
    TG_FAIL("[flash_attention_backward] runs on CUDA tensors only, got ", in[0].device().str());
  }
  SaveSpec saves() const override { return {false, false}; }
  std::string attrs() const override {
    std::ostringstream s;
    s << "scale=" << p_.scale << ", causal=" << (p_.causal ? "true" : "false");
    return s.str();
  }
  const FlashAttentionParams& params() const { return p_; }
  bool packed() const { return packed_; }

 private:
  FlashAttentionParams p_;
  bool packed_;
};

TensorList FlashAttentionOp::backward(const BackwardContext& ctx, const TensorList& grads) const {
  TensorList result(has_bias_ ? 4 : 3);
  if (!grads[0].defined()) return result;  // only the logsumexp was used: it carries no gradient
  const Tensor o = ctx.output(0);
  // cuDNN reads dO laid out as O: [B, L, H, Dv] in memory.
  Tensor dot = grads[0].transpose(1, 2);
  if (!dot.is_contiguous()) dot = dot.contiguous();
  if (dot.storage_offset() % kAlign != 0) dot = dot.clone();
  TensorList in{ctx.input(0), ctx.input(1), ctx.input(2), o, dot.transpose(1, 2), ctx.output(1), ctx.output(2)};
  if (has_bias_) in.push_back(ctx.input(3));
  TensorList g = dispatch(std::make_shared<const FlashAttentionBackwardOp>(p_, false), std::move(in));
  for (size_t i = 0; i < 3; ++i)
    if (ctx.needs_input_grad(i)) result[i] = g[i];
  return result;
}

// q, k or v as the fused op sees it: 4-D (a 3-D operand gets a head dim of 1), aligned.
TensorMeta meta4(const Tensor& t) {
  TensorMeta m = aligned_meta(t);
  if (m.sizes.size() == 3) {
    m.sizes.insert(m.sizes.begin() + 1, 1);
    m.strides.insert(m.strides.begin() + 1, m.sizes[2] * m.strides[1]);
  }
  return m;
}

// The mask as [b, h, L|1, S] for a query of `q_dim` dims (3-D queries get a head dim of 1).
Tensor mask4(const Tensor& mask, int64_t q_dim) {
  Tensor m = mask;
  while (m.dim() < q_dim) m = m.unsqueeze(0);
  return q_dim == 3 ? m.unsqueeze(1) : m;
}

// An additive bias [b, h, L, S] from a 4-D mask, laid out as cuDNN reads it (bias_meta).
Tensor additive_bias(const Tensor& m, int64_t L, int64_t S, DType dtype) {
  Tensor b = m;
  // A bool mask keeps positions where it is true: 0 there, -inf elsewhere (made from the mask
  // itself, not from factories, so that fake tensors outside a trace need no device).
  if (m.dtype() == kBool)
    b = masked_fill(mul(to(m, m.device(), dtype), Scalar(0.0)), eq(m, Scalar(false)),
                    -std::numeric_limits<double>::infinity());
  b = b.expand({m.size(0), m.size(1), L, S});
  const TensorMeta want = bias_meta(m.size(0), m.size(1), L, S, dtype, m.device());
  if (b.strides() == want.strides && b.storage_offset() == 0) return b;
  const int64_t row = want.strides[2];
  return row == S ? b.contiguous() : pad(b, {0, row - S}).narrow(3, 0, S);
}

bool any_requires_grad(const Tensor& q, const Tensor& k, const Tensor& v) {
  return q.requires_grad() || k.requires_grad() || v.requires_grad();
}

}  // namespace

SdpaKernel sdpa_kernel() { return t_kernel; }

SdpaKernelGuard::SdpaKernelGuard(SdpaKernel kernel) : previous_(t_kernel) { t_kernel = kernel; }
SdpaKernelGuard::~SdpaKernelGuard() { t_kernel = previous_; }

OpPtr packed_attention_gradients_op(const Op& op) {
  const auto* b = dynamic_cast<const FlashAttentionBackwardOp*>(&op);
  if (b == nullptr || b->packed()) return nullptr;
  return std::make_shared<const FlashAttentionBackwardOp>(b->params(), true);
}

Tensor flash_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& bias, double scale,
                       bool is_causal, double dropout_p) {
  TG_CHECK(dropout_p >= 0.0 && dropout_p < 1.0, "[flash_attention] dropout_p must be in [0, 1), got ", dropout_p);
  TensorList in{aligned(q), aligned(k), aligned(v)};
  if (bias.defined()) {
    TG_CHECK(bias.dim() == 4 && q.dim() == 4 && k.dim() == 4, "[flash_attention] expected a 4-D bias and operands, ",
             "got bias ", shape_str(bias.sizes()), " and query ", shape_str(q.sizes()));
    in.push_back(additive_bias(bias, q.size(2), k.size(2), q.dtype()));
  }
  // Philox blocks reserved per call: one per four scores, whatever share of them cuDNN draws.
  const uint64_t blocks =
      dropout_p > 0.0 && q.dim() == 4 && k.dim() == 4
          ? static_cast<uint64_t>((q.size(0) * q.size(1) * q.size(2) * k.size(2) + 3) / 4)
          : 0;
  auto op = std::make_shared<const FlashAttentionOp>(FlashAttentionParams{scale, is_causal, dropout_p}, bias.defined(),
                                                     blocks);
  return dispatch(op, std::move(in))[0];
}

std::string attention_operands_blocker(const Tensor& q, const Tensor& k, const Tensor& v) {
  std::ostringstream why;
  if (k.dtype() != q.dtype() || v.dtype() != q.dtype() || k.device() != q.device() || v.device() != q.device())
    return "query, key and value differ in dtype or device";
  if ((q.dim() != 3 && q.dim() != 4) || k.dim() != q.dim() || v.dim() != q.dim()) {
    why << "it takes query, key and value of 3 or 4 dims alike, got " << shape_str(q.sizes()) << ", "
        << shape_str(k.sizes()) << " and " << shape_str(v.sizes());
    return why.str();
  }
  for (int64_t i = 0; i + 2 < q.dim(); ++i)
    if (k.size(i) != q.size(i) || v.size(i) != q.size(i)) {
      why << "the batch dims of query, key and value differ (broadcast): " << shape_str(q.sizes()) << ", "
          << shape_str(k.sizes()) << " and " << shape_str(v.sizes());
      return why.str();
    }
  return {};
}

std::string fused_attention_blocker(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask,
                                    double dropout_p, bool is_causal, double scale) {
  std::ostringstream why;
  if (!q.device().is_cuda()) return "it runs on CUDA tensors, got the query on " + q.device().str();
  if (!is_low_precision(q.dtype()))
    return std::string("it takes float16 or bfloat16 operands, got ") + std::string(dtype_name(q.dtype()));
  if (std::string why_not = attention_operands_blocker(q, k, v); !why_not.empty()) return why_not;
  const int64_t D = q.size(-1), Dv = v.size(-1), L = q.size(-2), S = k.size(-2);
  if (D % kAlign != 0 || Dv % kAlign != 0 || D > kMaxHeadDim || Dv > kMaxHeadDim) {
    why << "head dims must be multiples of " << kAlign << " up to " << kMaxHeadDim << ", got " << D << " and " << Dv;
    return why.str();
  }
  if (q.numel() == 0 || k.numel() == 0 || v.numel() == 0) return "empty operands";
  const int64_t B = q.size(0), H = q.dim() == 4 ? q.size(1) : 1;
  TensorMeta bias;
  if (mask.defined()) {
    if (mask.device() != q.device()) return "a mask on " + mask.device().str();
    if (mask.dtype() != kBool && mask.dtype() != q.dtype())
      return std::string("a mask of dtype ") + std::string(dtype_name(mask.dtype()));
    if (mask.requires_grad()) return "a mask that requires grad";
    if (mask.dim() > q.dim() || mask.dim() == 0) return "a mask of " + std::to_string(mask.dim()) + " dims";
    Shape m(mask.sizes());
    while (static_cast<int64_t>(m.size()) < q.dim()) m.insert(m.begin(), 1);
    if (q.dim() == 3) m.insert(m.begin() + 1, 1);
    if ((m[0] != 1 && m[0] != B) || (m[1] != 1 && m[1] != H) || (m[2] != 1 && m[2] != L) || m[3] != S) {
      why << "a mask of shape " << shape_str(mask.sizes()) << " that does not broadcast to the scores";
      return why.str();
    }
    bias = bias_meta(m[0], m[1], L, S, q.dtype(), q.device());
  }
#ifdef TG_WITH_CUDA
  if (cuda_is_available()) {
    std::string cudnn_says;
    const bool backward = is_grad_enabled() && any_requires_grad(q, k, v);
    if (!cuda::flash_attention_supported(meta4(q), meta4(k), meta4(v), mask.defined() ? &bias : nullptr,
                                         {scale, is_causal, dropout_p}, backward, &cudnn_says))
      return "cuDNN does not take it: " + cudnn_says;
  }
#else
  (void)is_causal;
  (void)scale;
  (void)dropout_p;
#endif
  return {};
}

std::optional<Tensor> fused_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask,
                                      double dropout_p, bool is_causal, double scale) {
  const SdpaKernel mode = sdpa_kernel();
  if (mode == SdpaKernel::kComposed) return std::nullopt;
  const std::string why = fused_attention_blocker(q, k, v, mask, dropout_p, is_causal, scale);
  if (!why.empty()) {
    TG_CHECK(mode != SdpaKernel::kFused, "[scaled_dot_product_attention] the fused kernel was asked for ",
             "(SdpaKernel::kFused) but does not apply: ", why);
    return std::nullopt;
  }
  const bool three = q.dim() == 3;
  auto four = [&](const Tensor& t) { return three ? t.unsqueeze(1) : t; };
  Tensor bias = mask.defined() ? mask4(mask, q.dim()) : Tensor();
  // A row whose every key is masked gets zeros and zero gradients, as PyTorch 2.5+ gives it (its
  // safe softmax), where the kernel's softmax over nothing would give NaN: such a row attends to
  // every key instead, and its output is replaced by zeros, so the gradient through it is zero.
  Tensor dead;  // [b|1, h|1, L|1, 1]: true for the rows that attend to nothing
  if (bias.defined()) {
    const bool boolean = bias.dtype() == kBool;
    const Tensor kept = boolean ? to(bias, bias.device(), q.dtype()) : bias;
    dead = eq(amax(kept, {-1}, true), boolean ? 0.0 : -std::numeric_limits<double>::infinity());
    const Tensor attend_all =
        scalar_tensor(boolean ? Scalar(true) : Scalar(0.0), {.dtype = bias.dtype(), .device = bias.device()});
    bias = where(dead, attend_all, bias);
  }
  Tensor out = flash_attention(four(q), four(k), four(v), bias, scale, is_causal, dropout_p);
  // Zeroed in the kernel's [B, L, H, D] memory order, so that merging the heads stays a view.
  if (dead.defined())
    out = where(dead.transpose(1, 2), scalar_tensor(0.0, {.dtype = out.dtype(), .device = out.device()}),
                out.transpose(1, 2))
              .transpose(1, 2);
  return three ? out.squeeze(1) : out;
}

}  // namespace tg
