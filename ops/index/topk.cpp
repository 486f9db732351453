// topk: sorting (order key, index) pairs per row; the key (ops/index/topk_key.h) puts NaN above every
// number and keeps equal elements in index order, identically on the CPU and on CUDA.
#include "ops/index/topk.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "ops/core/dispatch.h"
#include "ops/factory/factory.h"
#include "ops/index/gather.h"
#include "ops/index/row_layout.h"
#include "ops/index/topk_key.h"

#ifdef TG_WITH_CUDA
#include "ops/index/cuda/topk.h"
#endif

namespace tg {
namespace {

// The k preferred elements of each row of x along dim, on the host.
template <typename T>
void topk_cpu(const Tensor& x, int64_t k, int64_t dim, bool largest, const Tensor& values, const Tensor& indices) {
  using Key = topk_key_t<T>;
  const int64_t n = x.dim() == 0 ? 1 : x.size(dim);
  const int64_t rows = x.numel() / n;
  const RowLayout in = row_layout(x, dim, "topk");
  const RowLayout out = row_layout(values, dim, "topk");
  const RowLayout out_idx = row_layout(indices, dim, "topk");
  const T* src = x.data_ptr<T>();
  T* vals = values.data_ptr<T>();
  int64_t* idx = indices.data_ptr<int64_t>();
  std::vector<std::pair<Key, int64_t>> row(static_cast<size_t>(n));
  for (int64_t r = 0; r < rows; ++r) {
    const T* x_row = src + in.row_offset(r);
    for (int64_t j = 0; j < n; ++j) row[static_cast<size_t>(j)] = {topk_rank_key(x_row[j * in.dim_stride], largest), j};
    std::partial_sort(row.begin(), row.begin() + k, row.end());  // pairs: key, then index
    const int64_t o = out.row_offset(r), oi = out_idx.row_offset(r);
    for (int64_t j = 0; j < k; ++j) {
      const int64_t i = row[static_cast<size_t>(j)].second;
      vals[o + j * out.dim_stride] = x_row[i * in.dim_stride];
      idx[oi + j * out_idx.dim_stride] = i;
    }
  }
}

class TopkOp final : public Op {
 public:
  TopkOp(int64_t k, int64_t dim, bool largest, bool sorted) : k_(k), dim_(dim), largest_(largest), sorted_(sorted) {}
  const OpSchema& schema() const override {
    static const OpSchema s{.name = "topk"};
    return s;
  }
  std::vector<TensorMeta> infer(const TensorList& in) const override {
    const Tensor& x = in[0];
    TG_CHECK(x.dtype() != kBool, "[topk] expected a numeric tensor, got bool; convert it with to(kInt32) first");
    const int64_t d = wrapped_dim(x);
    const int64_t n = x.dim() == 0 ? 1 : x.size(d);
    TG_CHECK(k_ >= 0 && k_ <= n, "[topk] selected index k out of range: k = ", k_, ", but dimension ", d,
             " of the input (shape ", shape_str(x.sizes()), ") has size ", n);
    Shape sizes = x.sizes();
    if (x.dim() > 0) sizes[static_cast<size_t>(d)] = k_;
    std::vector<TensorMeta> out;
    out.push_back(contiguous_meta(sizes, x.dtype(), x.device()));
    out.push_back(contiguous_meta(sizes, kInt64, x.device()));
    return out;
  }
  void eval(const TensorList& in, TensorList& out) const override {
    const Tensor& x = in[0];
    if (out[0].numel() == 0) return;
    const int64_t d = wrapped_dim(x);
    // A 0-dim input is its own result for k = 0 as for k = 1 (PyTorch's 0-dim output holds it).
    const int64_t k = x.dim() == 0 ? 1 : k_;
#ifdef TG_WITH_CUDA
    if (x.is_cuda()) {
      cuda::topk(x, k, d, largest_, out[0], out[1]);
      return;
    }
#endif
    TG_CHECK(x.is_cpu(), "[topk] unsupported device ", x.device().str());
    TG_DISPATCH_NUMERIC(x.dtype(), "topk", [&] { topk_cpu<scalar_t>(x, k, d, largest_, out[0], out[1]); });
  }
  // The values' gradient goes back to the positions they came from; other elements get zero.
  TensorList backward(const BackwardContext& ctx, const TensorList& grads) const override {
    const TensorMeta& x = ctx.input_meta(0);
    if (x.sizes.empty()) return {grads[0]};
    const Tensor zero = zeros(x.sizes, {.dtype = x.dtype, .device = x.device});
    return {scatter_add(zero, dim_, ctx.output(1), grads[0])};
  }
  SaveSpec saves() const override { return {.inputs = false, .outputs = true, .output_mask = 0b10}; }
  std::string attrs() const override {
    return detail::concat("k=", k_, ", dim=", dim_, ", largest=", largest_ ? "true" : "false",
                          ", sorted=", sorted_ ? "true" : "false");
  }

 private:
  int64_t wrapped_dim(const Tensor& x) const { return wrap_dim(dim_, std::max<int64_t>(x.dim(), 1), "topk"); }

  int64_t k_, dim_;
  bool largest_, sorted_;
};

}  // namespace

std::pair<Tensor, Tensor> topk(const Tensor& input, int64_t k, int64_t dim, bool largest, bool sorted) {
  TensorList out = dispatch(std::make_shared<const TopkOp>(k, dim, largest, sorted), {input});
  return {std::move(out[0]), std::move(out[1])};
}

std::pair<Tensor, Tensor> Tensor::topk(int64_t k, int64_t dim, bool largest, bool sorted) const {
  return tg::topk(*this, k, dim, largest, sorted);
}

}  // namespace tg
