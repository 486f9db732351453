// Gathering and scattering along one dim by an index vector: index_select and index_add.
#include <type_traits>

#include "ops/core/dispatch.h"
#include "ops/elementwise/copy.h"
#include "ops/factory/factory.h"
#include "ops/shape/join.h"
#include "ops/shape/view.h"

#ifdef TG_WITH_CUDA
#include "ops/index/cuda/index.h"
#endif

namespace tg {
namespace {

// Storage offsets (in elements) of every position of a sub-shape, row-major.
std::vector<int64_t> offsets_of(const Shape& sizes, const Shape& strides, size_t begin, size_t end) {
  int64_t n = 1;
  for (size_t i = begin; i < end; ++i) n *= sizes[i];
  std::vector<int64_t> out(static_cast<size_t>(n));
  std::vector<int64_t> idx(end - begin, 0);
  int64_t off = 0;
  for (int64_t k = 0; k < n; ++k) {
    out[static_cast<size_t>(k)] = off;
    for (size_t j = end; j-- > begin;) {  // odometer step from the innermost dim
      if (++idx[j - begin] < sizes[j]) {
        off += strides[j];
        break;
      }
      off -= (sizes[j] - 1) * strides[j];
      idx[j - begin] = 0;
    }
  }
  return out;
}

// A tensor's geometry split around `dim`: offsets of the dims before it and after it.
struct DimSplit {
  std::vector<int64_t> outer, inner;
  int64_t stride = 0;
};

DimSplit split_at(const Tensor& t, int64_t dim) {
  if (t.dim() == 0) return {{0}, {0}, 0};
  const auto d = static_cast<size_t>(dim);
  return {offsets_of(t.sizes(), t.strides(), 0, d), offsets_of(t.sizes(), t.strides(), d + 1, t.sizes().size()),
          t.strides()[d]};
}

// Index values on the host, each checked against [0, size).
std::vector<int64_t> read_index(const char* op, const Tensor& index, int64_t size, int64_t dim) {
  const int64_t n = index.numel();
  const int64_t stride = index.dim() == 0 ? 0 : index.strides()[0];
  std::vector<int64_t> out(static_cast<size_t>(n));
  TG_DISPATCH_ALL(index.dtype(), op, [&] {
    if constexpr (std::is_same_v<scalar_t, int32_t> || std::is_same_v<scalar_t, int64_t>) {
      const scalar_t* p = index.data_ptr<scalar_t>();
      for (int64_t i = 0; i < n; ++i) out[static_cast<size_t>(i)] = static_cast<int64_t>(p[i * stride]);
    }
  });
  for (int64_t v : out)
    TG_CHECK(v >= 0 && v < size, "[", op, "] index ", v, " is out of range for dimension ", dim, " with size ", size,
             " (index out of range in self)");
  return out;
}

// Validates dtype, rank and device of an index vector for `x` and returns the wrapped dim.
int64_t check_index(const char* op, const Tensor& x, int64_t dim, const Tensor& index) {
  const int64_t d = wrap_dim(dim, x.dim(), op);
  TG_CHECK(index.dtype() == kInt64 || index.dtype() == kInt32, "[", op, "] Expected dtype int32/int64 for index, got ",
           dtype_name(index.dtype()));
  TG_CHECK(index.dim() <= 1, "[", op, "] Index is supposed to be a vector, got sizes ", shape_str(index.sizes()));
  TG_CHECK(index.device() == x.device(), "[", op, "] expected index on ", x.device().str(),
           " (the input's device), got ", index.device().str());
  if (x.dim() == 0)
    TG_CHECK(index.numel() == 1, "[", op, "] Index to scalar can have only 1 value, got ", index.numel(), " value(s)");
  return d;
}

// Sizes of x with dim replaced by n (x itself when 0-dim).
Shape with_dim_size(const Tensor& x, int64_t dim, int64_t n) {
  Shape s = x.sizes();
  if (!s.empty()) s[static_cast<size_t>(dim)] = n;
  return s;
}

class IndexSelectOp final : public Op {
 public:
  explicit IndexSelectOp(int64_t dim) : dim_(dim) {}
  const OpSchema& schema() const override {
    static const OpSchema s{"index_select", 0, -1, -1};
    return s;
  }
  std::vector<TensorMeta> infer(const TensorList& in) const override {
    const int64_t d = check_index("index_select", in[0], dim_, in[1]);
    return single_output(contiguous_meta(with_dim_size(in[0], d, in[1].numel()), in[0].dtype(), in[0].device()));
  }
  void eval(const TensorList& in, TensorList& out) const override {
    const Tensor& x = in[0];
    const int64_t d = wrap_dim(dim_, x.dim(), "index_select");
#ifdef TG_WITH_CUDA
    if (out[0].is_cuda()) {
      cuda::index_select(x, d, in[1], out[0]);
      return;
    }
#endif
    const int64_t size = x.dim() == 0 ? 1 : x.size(d);
    const std::vector<int64_t> idx = read_index("index_select", in[1], size, d);
    const DimSplit s = split_at(x, d);
    TG_DISPATCH_ALL(x.dtype(), "index_select", [&] {
      const scalar_t* src = x.data_ptr<scalar_t>();
      scalar_t* dst = out[0].data_ptr<scalar_t>();
      for (int64_t o : s.outer)
        for (int64_t i : idx)
          for (int64_t k : s.inner) *dst++ = src[o + i * s.stride + k];
    });
  }
  TensorList backward(const BackwardContext& ctx, const TensorList& g) const override {
    const TensorMeta& m = ctx.input_meta(0);
    Tensor zero = zeros(m.sizes, {.dtype = g[0].dtype(), .device = g[0].device()});
    return {index_add(zero, dim_, ctx.input(1), g[0]), Tensor()};
  }
  std::string attrs() const override { return "dim=" + std::to_string(dim_); }

 private:
  int64_t dim_;
};

class IndexAddOp final : public Op {
 public:
  explicit IndexAddOp(int64_t dim) : dim_(dim) {}
  const OpSchema& schema() const override {
    static const OpSchema s{"index_add", 0, -1, -1};
    return s;
  }
  std::vector<TensorMeta> infer(const TensorList& in) const override {
    const Tensor &x = in[0], &index = in[1], &source = in[2];
    const int64_t d = check_index("index_add", x, dim_, index);
    TG_CHECK(x.dtype() != kBool, "[index_add] expected a numeric dtype, got bool");
    TG_CHECK(source.dtype() == x.dtype(), "[index_add] self (", dtype_name(x.dtype()), ") and source (",
             dtype_name(source.dtype()), ") must have the same scalar type");
    TG_CHECK(source.device() == x.device(), "[index_add] expected source on ", x.device().str(), ", got ",
             source.device().str());
    const Shape expected = with_dim_size(x, d, index.numel());
    const bool scalar_ok = x.dim() == 0 && source.numel() == 1 && source.dim() <= 1;
    TG_CHECK(scalar_ok || source.sizes() == expected, "[index_add] source of sizes ", shape_str(source.sizes()),
             " does not match ", shape_str(expected), " (self sizes ", shape_str(x.sizes()), " with dim ", d,
             " replaced by the index length ", index.numel(), ")");
    return single_output(contiguous_meta(x.sizes(), x.dtype(), x.device()));
  }
  void eval(const TensorList& in, TensorList& out) const override {
    const Tensor &x = in[0], &index = in[1], &source = in[2];
    const int64_t d = wrap_dim(dim_, x.dim(), "index_add");
    out[0].copy_(x);
    const Tensor src = x.dim() == 0 ? source.reshape({}) : source;
#ifdef TG_WITH_CUDA
    if (out[0].is_cuda()) {
      cuda::index_add(out[0], d, index, src);
      return;
    }
#endif
    const int64_t size = x.dim() == 0 ? 1 : x.size(d);
    const std::vector<int64_t> idx = read_index("index_add", index, size, d);
    const DimSplit so = split_at(out[0], d);
    const DimSplit ss = split_at(src, d);
    TG_DISPATCH_NUMERIC(x.dtype(), "index_add", [&] {
      const scalar_t* sp = src.data_ptr<scalar_t>();
      scalar_t* dp = out[0].data_ptr<scalar_t>();
      for (size_t o = 0; o < so.outer.size(); ++o)
        for (size_t i = 0; i < idx.size(); ++i)
          for (size_t k = 0; k < so.inner.size(); ++k)
            dp[so.outer[o] + idx[i] * so.stride + so.inner[k]] +=
                sp[ss.outer[o] + static_cast<int64_t>(i) * ss.stride + ss.inner[k]];
    });
  }
  TensorList backward(const BackwardContext& ctx, const TensorList& g) const override {
    Tensor grad_source;
    if (ctx.needs_input_grad(2)) {
      grad_source = index_select(g[0], dim_, ctx.input(1)).reshape(ctx.input_meta(2).sizes);
    }
    return {g[0], Tensor(), grad_source};
  }
  std::string attrs() const override { return "dim=" + std::to_string(dim_); }

 private:
  int64_t dim_;
};

}  // namespace

Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index) {
  return call_op<IndexSelectOp>({x, index}, dim);
}

Tensor index_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& source) {
  return call_op<IndexAddOp>({x, index, source}, dim);
}

Tensor Tensor::index_select(int64_t dim, const Tensor& index) const { return tg::index_select(*this, dim, index); }

}  // namespace tg
