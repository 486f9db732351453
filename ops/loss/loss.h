// Losses, as in torch.nn.functional.
#pragma once

#include <cstdint>
#include <optional>

#include "ops/core/op.h"
#include "tensor/tensor.h"

namespace tg {

// PyTorch's default ignore_index: targets equal to it add nothing to the loss or its gradient.
inline constexpr int64_t kDefaultIgnoreIndex = -100;

// Keyword arguments of nll_loss, as F.nll_loss.
struct NllLossOptions {
  Tensor weight{};                            // [C] per-class weights (no gradient), or undefined
  int64_t ignore_index = kDefaultIgnoreIndex;
  Reduction reduction = Reduction::Mean;      // Mean divides by the summed weights of counted targets
};

// Keyword arguments of cross_entropy, as F.cross_entropy.
struct CrossEntropyOptions {
  Tensor weight{};                            // [C] per-class weights (no gradient), or undefined
  int64_t ignore_index = kDefaultIgnoreIndex;  // class-index targets only
  Reduction reduction = Reduction::Mean;      // Mean divides by the summed weights of counted targets
  double label_smoothing = 0.0;               // in [0, 1]: mixes the target with a uniform distribution
};

Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean);
Tensor l1_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean);
// input: log-probabilities [N, C], [C] or [N, C, d1, ..., dk]; target: class indices (int64) [N],
// [] or [N, d1, ..., dk].
Tensor nll_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean);
Tensor nll_loss(const Tensor& input, const Tensor& target, const NllLossOptions& options);
// PyTorch's name of a reduction: "none", "mean" or "sum".
const char* reduction_name(Reduction r);
// log_softmax over the class dim (1, or 0 for a [C] input) followed by nll_loss; a floating target of
// the input's shape holds class probabilities instead of indices.
Tensor cross_entropy(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean);
Tensor cross_entropy(const Tensor& input, const Tensor& target, const CrossEntropyOptions& options);

// The attributes of the one-op cross_entropy (class indices, no weight, no label smoothing).
struct CrossEntropyInfo {
  Reduction reduction;
  int64_t ignore_index;
};
// Those of a cross_entropy op, or nothing for any other op (for graph rewrites).
std::optional<CrossEntropyInfo> cross_entropy_info(const Op& op);

}  // namespace tg
