// Gradient clipping by the total norm (torch.nn.utils.clip_grad_norm_ and its two halves), with
// no host synchronization: the clip coefficient stays a device tensor, so a clipped step can be
// captured in a CUDA graph or traced by compile().
#pragma once

#include <optional>

#include "tensor/tensor.h"

namespace tg::nn::utils {

// Scales the parameters' gradients in place so that their total norm of order norm_type (2, 1, any
// p, inf, -inf or 0, as torch.linalg.vector_norm of the per-tensor norms) is at most max_norm: each
// is multiplied by min(1, max_norm / (norm + 1e-6)), computed on the device. Parameters without a
// grad are skipped. Returns the total norm, a 0-dim tensor on the first gradient's device in the
// gradients' promoted dtype (accumulated in float32, or float64 for float64 gradients); a CPU
// float32 zero when no parameter has a grad. error_if_nonfinite reads the norm on the host (a
// synchronization, as in PyTorch) and raises where it is NaN or infinite. foreach is accepted for
// PyTorch's signature: both paths are the same one here.
Tensor clip_grad_norm_(const TensorList& parameters, double max_norm, double norm_type = 2.0,
                       bool error_if_nonfinite = false, std::optional<bool> foreach = std::nullopt);

// clip_grad_norm_ with max_norm a 0-dim (or one-element) floating tensor on any device, read when the
// ops run: a traced or captured clip (a compiled step's grad transform) follows every change of the
// threshold, written in place (fill_), without re-tracing. PyTorch's analogue passes a tensor max_norm.
Tensor clip_grad_norm_(const TensorList& parameters, const Tensor& max_norm, double norm_type = 2.0,
                       bool error_if_nonfinite = false, std::optional<bool> foreach = std::nullopt);

// torch.nn.utils.get_total_norm: the norm of the norms of `tensors` (the gradients themselves), as
// clip_grad_norm_ computes it: per-tensor partial reductions gathered into one buffer, then one
// reduction over it.
Tensor get_total_norm(const TensorList& tensors, double norm_type = 2.0, bool error_if_nonfinite = false,
                      std::optional<bool> foreach = std::nullopt);

// torch.nn.utils.clip_grads_with_norm_: multiplies the parameters' gradients by
// min(1, max_norm / (total_norm + 1e-6)) in place, with total_norm a 0-dim tensor (get_total_norm's).
void clip_grads_with_norm_(const TensorList& parameters, double max_norm, const Tensor& total_norm,
                           std::optional<bool> foreach = std::nullopt);
// clip_grads_with_norm_ with max_norm a 0-dim tensor, as for clip_grad_norm_.
void clip_grads_with_norm_(const TensorList& parameters, const Tensor& max_norm, const Tensor& total_norm,
                           std::optional<bool> foreach = std::nullopt);

// clip_grad_norm_ for the gradients themselves rather than their parameters (undefined entries
// skipped): what a compiled optimizer update receives, e.g. in CompiledStep::set_grad_transform.
Tensor clip_norm_(const TensorList& grads, double max_norm, double norm_type = 2.0, bool error_if_nonfinite = false);
// clip_norm_ with max_norm a 0-dim tensor, as for clip_grad_norm_: e.g. a compiled step's
// transform [&](const TensorList& g) { clip_norm_(g, threshold); } with threshold.fill_(v) between
// steps clips at v without re-tracing.
Tensor clip_norm_(const TensorList& grads, const Tensor& max_norm, double norm_type = 2.0,
                  bool error_if_nonfinite = false);

}  // namespace tg::nn::utils
