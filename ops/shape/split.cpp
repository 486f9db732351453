// Splits are compositions of narrow/select, so every piece is a view of the input and the
// gradient flows through those views' own backward rules.
#include "ops/shape/split.h"

#include "ops/shape/view.h"
#include "tensor/shape.h"

namespace tg {
namespace {

std::string sizes_str(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

}  // namespace

TensorList split_with_sizes(const Tensor& x, const std::vector<int64_t>& sizes, int64_t dim) {
  TG_CHECK(x.dim() > 0, "[split_with_sizes] expects at least a 1-dimensional tensor, got a 0-dim tensor");
  const int64_t d = wrap_dim(dim, x.dim(), "split_with_sizes");
  int64_t total = 0;
  for (int64_t s : sizes) {
    TG_CHECK(s >= 0, "[split_with_sizes] expects split_sizes have only non-negative entries, but got split_sizes=",
             sizes_str(sizes));
    total += s;
  }
  TG_CHECK(total == x.size(d), "[split_with_sizes] expects split_sizes to sum exactly to ", x.size(d),
           " (input tensor's size at dimension ", d, "), but got split_sizes=", sizes_str(sizes));
  TensorList out;
  out.reserve(sizes.size());
  int64_t start = 0;
  for (int64_t s : sizes) {
    out.push_back(narrow(x, d, start, s));
    start += s;
  }
  return out;
}

TensorList split(const Tensor& x, int64_t split_size, int64_t dim) {
  TG_CHECK(x.dim() > 0, "[split] expects at least a 1-dimensional tensor, got a 0-dim tensor");
  const int64_t d = wrap_dim(dim, x.dim(), "split");
  TG_CHECK(split_size >= 0, "[split] split_size must be non-negative, got ", split_size);
  const int64_t n = x.size(d);
  TG_CHECK(split_size > 0 || n == 0, "[split] split_size can only be 0 if dimension size is 0, but got dimension size ",
           n);
  if (split_size == 0) return {x.narrow(d, 0, 0)};
  std::vector<int64_t> sizes;
  for (int64_t start = 0; start < n; start += split_size) sizes.push_back(std::min(split_size, n - start));
  if (sizes.empty()) sizes.push_back(0);  // a zero-length dim still yields one (empty) piece
  return split_with_sizes(x, sizes, d);
}

TensorList chunk(const Tensor& x, int64_t chunks, int64_t dim) {
  TG_CHECK(x.dim() > 0, "[chunk] expects at least a 1-dimensional tensor, got a 0-dim tensor");
  TG_CHECK(chunks > 0, "[chunk] expects `chunks` to be greater than 0, got: ", chunks);
  const int64_t d = wrap_dim(dim, x.dim(), "chunk");
  const int64_t n = x.size(d);
  const int64_t each = (n + chunks - 1) / chunks;
  if (each == 0) {  // torch.chunk of an empty dim returns `chunks` empty pieces
    return split_with_sizes(x, std::vector<int64_t>(static_cast<size_t>(chunks), 0), d);
  }
  return split(x, each, d);
}

TensorList unbind(const Tensor& x, int64_t dim) {
  TG_CHECK(x.dim() > 0, "[unbind] dimension specified as ", dim, " but tensor has no dimensions");
  const int64_t d = wrap_dim(dim, x.dim(), "unbind");
  TensorList out;
  out.reserve(static_cast<size_t>(x.size(d)));
  for (int64_t i = 0; i < x.size(d); ++i) out.push_back(select(x, d, i));
  return out;
}

TensorList Tensor::split(int64_t split_size, int64_t dim) const { return tg::split(*this, split_size, dim); }
TensorList Tensor::chunk(int64_t chunks, int64_t dim) const { return tg::chunk(*this, chunks, dim); }
TensorList Tensor::unbind(int64_t dim) const { return tg::unbind(*this, dim); }

}  // namespace tg
