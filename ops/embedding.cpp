// Embedding is index_select on the weight's rows; index_select's backward is index_add, the
// scatter-add of the output gradient into the looked-up rows. padding_idx keeps the forward value
// but routes the gradient of those positions to a detached copy, so the padding row gets none.
#include "ops/embedding.h"

#include "ops/compare.h"
#include "ops/join.h"
#include "ops/view.h"
#include "tensor/shape.h"

namespace tg {

Tensor embedding(const Tensor& weight, const Tensor& indices, std::optional<int64_t> padding_idx) {
  TG_CHECK(weight.dim() == 2, "[embedding] 'weight' must be 2-D, got shape ", shape_str(weight.sizes()));
  TG_CHECK(indices.dtype() == kInt64 || indices.dtype() == kInt32,
           "[embedding] Expected tensor for argument 'indices' to have one of the following scalar types: Long, "
           "Int; but got ",
           dtype_name(indices.dtype()), " instead");
  TG_CHECK(indices.device() == weight.device(), "[embedding] expected indices on ", weight.device().str(),
           " (the weight's device), got ", indices.device().str());
  const int64_t n = weight.size(0);
  if (padding_idx) {
    TG_CHECK(*padding_idx < n && *padding_idx >= -n, "[embedding] padding_idx ", *padding_idx,
             " must be within num_embeddings (", n, ")");
    if (*padding_idx < 0) *padding_idx += n;
  }
  Shape out_shape = indices.sizes();
  out_shape.push_back(weight.size(1));
  Tensor out = index_select(weight, 0, indices.reshape({-1})).reshape(out_shape);
  if (!padding_idx || !out.requires_grad()) return out;
  Tensor keep = ne(indices, Scalar(*padding_idx)).unsqueeze(-1);
  return where(keep, out, out.detach());
}

}  // namespace tg
