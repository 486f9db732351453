// amax, amin and argmax.
#include "ops/core/dispatch.h"
#include "ops/elementwise/binary.h"
#include "ops/elementwise/compare.h"
#include "ops/elementwise/copy.h"
#include "ops/reduce/cpu/reduce.h"
#include "ops/reduce/reduce.h"
#include "ops/reduce/reduce_functors.h"
#include "ops/reduce/reduce_op.h"

#ifdef TG_WITH_CUDA
#include "ops/reduce/cuda/reduce.h"
#endif

namespace tg {
namespace {

class MinMaxOp final : public DimReduceOp {
 public:
  MinMaxOp(Shape dims, bool keepdim, bool is_max) : DimReduceOp(std::move(dims), keepdim), is_max_(is_max) {}
  const OpSchema& schema() const override {
    static const OpSchema max_schema{.name = "amax"};
    static const OpSchema min_schema{.name = "amin"};
    return is_max_ ? max_schema : min_schema;
  }
  std::vector<TensorMeta> infer(const TensorList& in) const override {
    const Tensor& x = in[0];
    const auto m = mask(x.dim());
    for (size_t i = 0; i < m.size(); ++i) {
      TG_CHECK(!m[i] || x.sizes()[i] != 0, "[", name(), "] expected reduction dim ", i,
               " to have non-zero size (input shape ", shape_str(x.sizes()), "): the ", is_max_ ? "maximum" : "minimum",
               " of no elements is undefined");
    }
    return single_output(contiguous_meta(reduced_sizes(x.sizes(), m, keepdim_), x.dtype(), x.device()));
  }
  void eval(const TensorList& in, TensorList& out) const override {
    const Tensor& x = in[0];
    const ReducePlan plan = make_reduce_plan(x.sizes(), x.strides(), mask(x.dim()));
#ifdef TG_WITH_CUDA
    if (out[0].is_cuda()) {
      cuda::minmax_reduce(x, plan, out[0], is_max_);
      return;
    }
#endif
    TG_DISPATCH_ALL(x.dtype(), name().data(), [&] {
      const scalar_t* src = x.data_ptr<scalar_t>();
      scalar_t* dst = out[0].data_ptr<scalar_t>();
      auto load = [src](int64_t off, int64_t, int64_t) { return src[off]; };
      auto store = [dst](int64_t o, scalar_t v) { dst[o] = v; };
      if (is_max_) cpu::reduce(plan, max_identity<scalar_t>(), load, MaxCombine{}, store);
      else cpu::reduce(plan, min_identity<scalar_t>(), load, MinCombine{}, store);
    });
  }
  // The gradient is shared evenly among the elements equal to the extremum (PyTorch's rule).
  TensorList backward(const BackwardContext& ctx, const TensorList& grads) const override {
    const Tensor x = ctx.input(0);
    const Shape& sizes = x.sizes();
    const Tensor winners = to(eq(x, as_keepdim(ctx.output(0), sizes)), x.device(), x.dtype());
    const Tensor count = sum(winners, dims_, true);
    return {mul(winners, div(as_keepdim(grads[0], sizes), count))};
  }
  SaveSpec saves() const override { return {.inputs = true, .outputs = true}; }

 private:
  bool is_max_;
};

class ArgmaxOp final : public Op {
 public:
  ArgmaxOp(std::optional<int64_t> dim, bool keepdim) : dim_(dim), keepdim_(keepdim) {}
  const OpSchema& schema() const override {
    static const OpSchema s{.name = "argmax", .flags = kNonDifferentiable};
    return s;
  }
  std::vector<bool> mask(const Tensor& x) const {
    return reduced_dim_mask(dim_ ? Shape{*dim_} : Shape{}, x.dim(), "argmax");
  }
  std::vector<TensorMeta> infer(const TensorList& in) const override {
    const Tensor& x = in[0];
    TG_CHECK(x.dtype() != kBool, "[argmax] expected a numeric tensor, got bool; convert it with to(kInt32) first");
    const auto m = mask(x);
    if (!dim_) {
      TG_CHECK(x.numel() != 0, "[argmax] expected reduction dim to be specified for input.numel() == 0 (input shape ",
               shape_str(x.sizes()), ")");
    } else if (x.dim() > 0) {
      const int64_t d = wrap_dim(*dim_, x.dim(), "argmax");
      TG_CHECK(x.sizes()[static_cast<size_t>(d)] != 0, "[argmax] expected reduction dim ", d,
               " to have non-zero size (input shape ", shape_str(x.sizes()), ")");
    }
    return single_output(contiguous_meta(reduced_sizes(x.sizes(), m, keepdim_), kInt64, x.device()));
  }
  void eval(const TensorList& in, TensorList& out) const override {
    const Tensor& x = in[0];
    const ReducePlan plan = make_reduce_plan(x.sizes(), x.strides(), mask(x), /*logical_order=*/true);
#ifdef TG_WITH_CUDA
    if (out[0].is_cuda()) {
      cuda::argmax_reduce(x, plan, out[0]);
      return;
    }
#endif
    TG_DISPATCH_NUMERIC(x.dtype(), "argmax", [&] {
      using Pair = IndexedValue<scalar_t>;
      const scalar_t* src = x.data_ptr<scalar_t>();
      int64_t* dst = out[0].data_ptr<int64_t>();
      cpu::reduce(
          plan, Pair{max_identity<scalar_t>(), INT64_MAX},
          [src](int64_t off, int64_t, int64_t r) { return Pair{src[off], r}; }, ArgMaxCombine{},
          [dst](int64_t o, Pair p) { dst[o] = p.index; });
    });
  }
  SaveSpec saves() const override { return {.inputs = false}; }
  std::string attrs() const override {
    return "dim=" + (dim_ ? std::to_string(*dim_) : std::string("none")) + ", keepdim=" + (keepdim_ ? "true" : "false");
  }

 private:
  std::optional<int64_t> dim_;
  bool keepdim_;
};

}  // namespace

Tensor amax(const Tensor& x, const Shape& dims, bool keepdim) { return call_op<MinMaxOp>({x}, dims, keepdim, true); }
Tensor amin(const Tensor& x, const Shape& dims, bool keepdim) { return call_op<MinMaxOp>({x}, dims, keepdim, false); }
Tensor argmax(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  return call_op<ArgmaxOp>({x}, dim, keepdim);
}

Tensor Tensor::amax(const Shape& dims, bool keepdim) const { return tg::amax(*this, dims, keepdim); }
Tensor Tensor::amin(const Shape& dims, bool keepdim) const { return tg::amin(*this, dims, keepdim); }
Tensor Tensor::argmax(std::optional<int64_t> dim, bool keepdim) const { return tg::argmax(*this, dim, keepdim); }

}  // namespace tg
