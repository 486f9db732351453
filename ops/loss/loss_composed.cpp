// Composed loss paths: class-weighted and label-smoothed nll over class indices, and cross-entropy
// with class probabilities, following PyTorch's cross_entropy_loss and nll_loss formulas exactly
// (including which weights Mean divides by).
#include "ops/loss/loss_composed.h"

#include "ops/elementwise/binary.h"
#include "ops/elementwise/compare.h"
#include "ops/elementwise/unary.h"
#include "ops/factory/factory.h"
#include "ops/index/gather.h"
#include "ops/reduce/reduce.h"
#include "ops/shape/join.h"

namespace tg {

Tensor class_index_loss(const Tensor& logp, const Tensor& target, const Tensor& weight, int64_t ignore_index,
                        Reduction reduction, double label_smoothing) {
  const int64_t classes = logp.size(1);
  const Tensor counted = ne(target, ignore_index);
  // Ignored rows read class 0 (always there) and are weighted out.
  const Tensor safe = where(counted, target, zeros({}, {.dtype = kInt64, .device = target.device()}));
  const Tensor picked = gather(logp, 1, safe.unsqueeze(1)).squeeze(1);
  const Tensor row_weight = weight.defined() ? mul(index_select(weight, 0, safe), counted) : counted.to(logp.dtype());
  Tensor rows = neg(mul(picked, row_weight));
  Tensor smooth;
  if (label_smoothing > 0) {
    // -sum_c weight[c] * logp[n, c], zero on ignored rows (PyTorch masks it with the ignore mask only).
    const Tensor weighted = weight.defined() ? mul(logp, weight) : logp;
    smooth = mul(neg(sum(weighted, {1})), counted);
  }
  auto mixed = [&](const Tensor& nll, const Tensor& sm) {
    if (!sm.defined()) return nll;
    return add(mul(nll, 1.0 - label_smoothing), mul(sm, label_smoothing / static_cast<double>(classes)));
  };
  switch (reduction) {
    case Reduction::None: return mixed(rows, smooth);
    case Reduction::Sum: return mixed(sum(rows), smooth.defined() ? sum(smooth) : smooth);
    case Reduction::Mean: {
      // Both terms divide by the summed weights of the counted rows (their count without weights).
      const Tensor total = sum(row_weight);
      return div(mixed(sum(rows), smooth.defined() ? sum(smooth) : smooth), total);
    }
  }
  return rows;
}

Tensor class_probability_loss(const Tensor& logp, const Tensor& target, const Tensor& weight, int64_t class_dim,
                              Reduction reduction, double label_smoothing) {
  const int64_t classes = logp.size(class_dim);
  Tensor p = target;
  if (label_smoothing > 0) p = add(mul(target, 1.0 - label_smoothing), label_smoothing / static_cast<double>(classes));
  Tensor prod = mul(logp, p);
  if (weight.defined()) {
    // weight along the class dim, broadcast over the batch and the trailing dims.
    Shape view(static_cast<size_t>(logp.dim() - class_dim), 1);
    view[0] = classes;
    prod = mul(prod, weight.reshape(view));
  }
  const Tensor rows = neg(sum(prod, {class_dim}));
  switch (reduction) {
    case Reduction::None: return rows;
    case Reduction::Sum: return sum(rows);
    case Reduction::Mean: return mean(rows);  // over rows, whatever the weights (as PyTorch)
  }
  return rows;
}

}  // namespace tg
