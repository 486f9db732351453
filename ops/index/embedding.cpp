// Embedding is index_select on the weight's rows; index_select's backward is index_add, the
// scatter-add of the output gradient into the looked-up rows. padding_idx keeps the forward value
// but routes the gradient of those positions to a detached copy, so the padding row gets none.
#include "ops/index/embedding.h"

#include <cmath>

#include "ops/elementwise/binary.h"
#include "ops/elementwise/compare.h"
#include "ops/elementwise/copy.h"
#include "ops/elementwise/unary.h"
#include "ops/factory/factory.h"
#include "ops/reduce/reduce.h"
#include "ops/shape/join.h"
#include "ops/shape/view.h"
#include "tensor/grad_mode.h"
#include "tensor/shape.h"

namespace tg {
namespace {

void check_indices(const Tensor& weight, const Tensor& indices) {
  TG_CHECK(weight.dim() == 2, "[embedding] 'weight' must be 2-D, got shape ", shape_str(weight.sizes()));
  TG_CHECK(indices.dtype() == kInt64 || indices.dtype() == kInt32,
           "[embedding] Expected tensor for argument 'indices' to have one of the following scalar types: Long, "
           "Int; but got ",
           dtype_name(indices.dtype()), " instead");
  TG_CHECK(indices.device() == weight.device(), "[embedding] expected indices on ", weight.device().str(),
           " (the weight's device), got ", indices.device().str());
}

// The norm_type-norm of each row of w [n, d] -> [n], as Tensor.norm(p) of that row.
Tensor row_norms(const Tensor& w, double p) {
  if (p == 2.0) return sqrt(sum(mul(w, w), {1}));
  if (p == 1.0) return sum(abs(w), {1});
  if (std::isinf(p)) return p > 0 ? amax(abs(w), {1}) : amin(abs(w), {1});
  if (p == 0.0) return sum(ne(w, Scalar(0.0)), {1}, false, w.dtype());
  return pow(sum(pow(abs(w), Scalar(p)), {1}), Scalar(1.0 / p));
}

}  // namespace

Tensor& embedding_renorm_(Tensor& weight, const Tensor& indices, double max_norm, double norm_type) {
  check_indices(weight, indices);
  TG_CHECK(is_floating(weight.dtype()), "[embedding_renorm_] expected a floating weight, got ",
           dtype_name(weight.dtype()));
  if (weight.numel() == 0 || indices.numel() == 0) return weight;
  NoGradGuard no_grad;
  const Device dev = weight.device();
  const TensorOptions f64{.dtype = kFloat64, .device = dev};
  const Tensor flat = indices.reshape({-1});
  // Which rows the indices reference (a count per row; duplicates are harmless).
  const Tensor hits = gt(index_add(zeros({weight.size(0)}, f64), 0, flat, ones({flat.numel()}, f64)), Scalar(0.0));
  // The norm in the weight's dtype, the factor in double and applied in the weight's dtype, as
  // PyTorch's kernel does.
  const Tensor norms = to(row_norms(weight, norm_type), dev, kFloat64);
  const Tensor one = scalar_tensor(1.0, f64);
  Tensor factor = where(gt(norms, Scalar(max_norm)), rdiv(add(norms, Scalar(1e-7)), Scalar(max_norm)), one);
  factor = to(where(hits, factor, one), dev, weight.dtype()).unsqueeze(1);
  copy_(weight, mul(weight, factor));
  return weight;
}

Tensor embedding(const Tensor& weight, const Tensor& indices, std::optional<int64_t> padding_idx,
                 std::optional<double> max_norm, double norm_type) {
  check_indices(weight, indices);
  const int64_t n = weight.size(0);
  if (padding_idx) {
    TG_CHECK(*padding_idx < n && *padding_idx >= -n, "[embedding] padding_idx ", *padding_idx,
             " must be within num_embeddings (", n, ")");
    if (*padding_idx < 0) *padding_idx += n;
  }
  if (max_norm) {
    Tensor w = weight;
    embedding_renorm_(w, indices, *max_norm, norm_type);
  }
  Shape out_shape = indices.sizes();
  out_shape.push_back(weight.size(1));
  Tensor out = index_select(weight, 0, indices.reshape({-1})).reshape(out_shape);
  if (!padding_idx || !out.requires_grad()) return out;
  Tensor keep = ne(indices, Scalar(*padding_idx)).unsqueeze(-1);
  return where(keep, out, out.detach());
}

}  // namespace tg
