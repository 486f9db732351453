// SDPA: the memory-efficient kernels (float32, float64) or the fused kernel (16-bit) where they take
// the operands; otherwise PyTorch's math
// reference path: scores by a batched matmul, masks, a safe softmax, dropout, and a second matmul. Each
// piece traces, captures and differentiates as its own op.
#include "ops/attention/attention.h"

#include <cmath>
#include <limits>

#include "ops/attention/efficient_attention.h"
#include "ops/attention/flash_attention.h"
#include "ops/core/autocast.h"
#include "ops/elementwise/binary.h"
#include "ops/elementwise/compare.h"
#include "ops/elementwise/copy.h"
#include "ops/factory/factory.h"
#include "ops/index/masking.h"
#include "ops/linalg/matmul.h"
#include "ops/norm/softmax.h"
#include "ops/random/dropout.h"
#include "ops/reduce/reduce.h"
#include "ops/shape/view.h"
#include "tensor/shape.h"

namespace tg {
namespace {

// softmax over the last dim as PyTorch's math attention takes it since 2.5 (_safe_softmax): a row
// whose every score is -inf (every key masked) gets zero weights and zero gradients, not NaN. The
// row's scores are replaced before the softmax too, so its backward never meets the NaN.
Tensor safe_softmax(const Tensor& scores, const Tensor& neg_inf) {
  const Tensor masked_row = eq(amax(scores, {-1}, true), neg_inf);
  const Tensor zero = scalar_tensor(0.0, {.dtype = scores.dtype(), .device = scores.device()});
  return where(masked_row, zero, softmax(where(masked_row, zero, scores), -1));
}

}  // namespace

Tensor scaled_dot_product_attention(const Tensor& q_in, const Tensor& k_in, const Tensor& v_in, const Tensor& attn_mask_in,
                                    double dropout_p, bool is_causal, std::optional<double> scale) {
  const Tensor q = autocast::to_low(q_in);
  const Tensor k = autocast::to_low(k_in);
  const Tensor v = autocast::to_low(v_in);
  // PyTorch's autocast casts every floating argument of SDPA, the additive mask included.
  const Tensor attn_mask = attn_mask_in.defined() ? autocast::to_low(attn_mask_in) : attn_mask_in;
  // One op at autocast's boundary, as PyTorch's: its pieces (softmax, sums) are not cast again.
  AutocastOffGuard inside_the_op;
  const char* op = "scaled_dot_product_attention";
  TG_CHECK(q.dim() >= 2 && k.dim() >= 2 && v.dim() >= 2, "[", op,
           "] expected query, key and value of at least 2 dims, got ", shape_str(q.sizes()), ", ",
           shape_str(k.sizes()), " and ", shape_str(v.sizes()));
  TG_CHECK(q.size(-1) == k.size(-1), "[", op, "] query's last dim ", q.size(-1), " must equal key's ", k.size(-1),
           " (query ", shape_str(q.sizes()), ", key ", shape_str(k.sizes()), ")");
  TG_CHECK(k.size(-2) == v.size(-2), "[", op, "] key and value must have the same sequence length, got key ",
           shape_str(k.sizes()), " and value ", shape_str(v.sizes()));
  TG_CHECK(q.dtype() == k.dtype() && q.dtype() == v.dtype(), "[", op,
           "] expected query, key and value of one dtype, got ", dtype_name(q.dtype()), ", ", dtype_name(k.dtype()),
           " and ", dtype_name(v.dtype()));
  TG_CHECK(dropout_p >= 0.0 && dropout_p < 1.0, "[", op, "] dropout_p must be in [0, 1), got ", dropout_p);
  TG_CHECK(!(is_causal && attn_mask.defined()), "[", op,
           "] _scaled_dot_product_attention: Explicit attn_mask should not be set when is_causal=True");
  const double s = scale.value_or(1.0 / std::sqrt(static_cast<double>(q.size(-1))));
  // float32 and float64 on CUDA: the memory-efficient kernels where they apply (no L x S scores);
  // see ops/attention/efficient_attention.h.
  if (std::optional<Tensor> efficient = memory_efficient_attention(q, k, v, attn_mask, dropout_p, is_causal, s))
    return *efficient;
  // The fused kernel (cuDNN's flash attention) where it applies; see ops/attention/flash_attention.h.
  if (std::optional<Tensor> fused = fused_attention(q, k, v, attn_mask, dropout_p, is_causal, s)) return *fused;
  if (is_low_precision(q.dtype())) {
    // PyTorch's attention kernels take 16-bit operands and compute in float32; composed in 16
    // bits, the scores and the gradients through them overflow float16 (NaN gradients where
    // PyTorch's are finite). So the composition runs on float32 copies, rounded once at the end.
    const bool float_mask = attn_mask.defined() && attn_mask.dtype() == q.dtype();
    TG_CHECK(!attn_mask.defined() || attn_mask.dtype() == kBool || float_mask, "[", op,
             "] expected a bool attn_mask or one of the query's dtype (", dtype_name(q.dtype()), "), got ",
             dtype_name(attn_mask.dtype()));
    const Tensor out = scaled_dot_product_attention(
        to(q, q.device(), kFloat32), to(k, k.device(), kFloat32), to(v, v.device(), kFloat32),
        float_mask ? to(attn_mask, attn_mask.device(), kFloat32) : attn_mask, dropout_p, is_causal, scale);
    return to(out, out.device(), q.dtype());
  }
  const int64_t L = q.size(-2), S = k.size(-2);
  Tensor scores = mul(matmul(q, transpose(k, -2, -1)), Scalar(s));
  const Tensor neg_inf =
      scalar_tensor(-std::numeric_limits<double>::infinity(), {.dtype = scores.dtype(), .device = scores.device()});
  if (is_causal) scores = where(triangle_mask(L, S, 0, true, scores.device()), scores, neg_inf);
  if (attn_mask.defined()) {
    TG_CHECK(attn_mask.device() == q.device(), "[", op, "] expected attn_mask on ", q.device().str(), ", got ",
             attn_mask.device().str());
    TG_CHECK(attn_mask.dim() >= 1 && attn_mask.size(-1) == S && (attn_mask.dim() < 2 || attn_mask.size(-2) == L ||
                                                                 attn_mask.size(-2) == 1),
             "[", op, "] attn_mask of shape ", shape_str(attn_mask.sizes()), " does not broadcast to the scores [..., ",
             L, ", ", S, "]");
    if (attn_mask.dtype() == kBool) {
      scores = where(attn_mask, scores, neg_inf);
    } else {
      TG_CHECK(attn_mask.dtype() == scores.dtype(), "[", op, "] expected a bool attn_mask or one of the query's dtype (",
               dtype_name(q.dtype()), "), got ", dtype_name(attn_mask.dtype()));
      scores = add(scores, attn_mask);
    }
  }
  // Only a given mask can make a row of -inf: the causal one keeps every row's first key (its
  // triangle is aligned top-left). Without one the plain softmax is PyTorch's result already, and
  // skips the safe softmax's maximum, comparison and two selects over the [.., L, S] scores.
  Tensor weights = attn_mask.defined() ? safe_softmax(scores, neg_inf) : softmax(scores, -1);
  if (dropout_p > 0.0) weights = dropout(weights, dropout_p, true);
  return matmul(weights, v);
}

}  // namespace tg
