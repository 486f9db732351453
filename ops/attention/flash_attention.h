// Fused attention: the choice scaled_dot_product_attention makes between the fused kernel (cuDNN's
// flash attention on CUDA, 16-bit operands) and the composed path, and the fused op itself.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "ops/core/op.h"
#include "tensor/tensor.h"

namespace tg {

// Which kernel scaled_dot_product_attention (and so nn::MultiheadAttention) runs.
enum class SdpaKernel : uint8_t {
  kAuto,      // fused wherever it applies (see fused_attention_blocker), composed otherwise
  kFused,     // fused, or an error saying why it does not apply
  kComposed,  // always composed (matmul, softmax, dropout, matmul)
};

// The kernel choice of this thread (kAuto unless a guard says otherwise).
SdpaKernel sdpa_kernel();

// Sets this thread's kernel choice for the guard's lifetime (tests compare fused with composed).
class SdpaKernelGuard {
 public:
  explicit SdpaKernelGuard(SdpaKernel kernel);
  ~SdpaKernelGuard();
  SdpaKernelGuard(const SdpaKernelGuard&) = delete;
  SdpaKernelGuard& operator=(const SdpaKernelGuard&) = delete;

 private:
  SdpaKernel previous_;
};

// Why query, key and value cannot go to an attention kernel as one problem, or an empty string when
// they can: one dtype on one device, 3 or 4 dims alike, equal leading (batch) dims. Both kernel
// families' blockers start from it.
std::string attention_operands_blocker(const Tensor& q, const Tensor& k, const Tensor& v);

// Why the fused kernel cannot take scaled_dot_product_attention's operands (after autocast), or an
// empty string when it can: CUDA, float16/bfloat16 q/k/v of 3 or 4 dims sharing their leading
// dims, head dims multiples of 8 up to 128, and a mask (bool or additive, of no gradient) that
// broadcasts over the heads' scores without adding dims; cuDNN must also build it (with dropout,
// cuDNN draws the masks from its own Philox stream, seeded from the global generator).
std::string fused_attention_blocker(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& attn_mask,
                                    double dropout_p, bool is_causal, double scale);

// scaled_dot_product_attention on the fused kernel, when sdpa_kernel() and the operands allow;
// nullopt means "compose it". Throws under SdpaKernel::kFused when the fused kernel does not apply.
std::optional<Tensor> fused_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& attn_mask,
                                      double dropout_p, bool is_causal, double scale);

// The fused op: q [B, H, L, D], k [B, H, S, D], v [B, H, S, Dv] of one 16-bit dtype on CUDA, an
// optional additive bias [B|1, H|1, L, S] of that dtype. Returns O [B, H, L, Dv] (laid out as
// [B, L, H, Dv]); its backward is the op flash_attention_backward, which reads the float32
// logsumexp [B, H, L, 1] and the Philox state that the forward saves (no L x S buffer anywhere).
Tensor flash_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& bias, double scale,
                       bool is_causal, double dropout_p = 0.0);

// For graph rewrites: the form of a flash_attention_backward op (null for any other op) whose one
// output is [B, L, 3 * H * D], dq, dk and dv side by side in each row (q, k and v of one shape): the
// gradient of the projection they were split from, without the cat that would join them.
OpPtr packed_attention_gradients_op(const Op& op);

}  // namespace tg
