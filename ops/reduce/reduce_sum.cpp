// sum, mean and sum_to (the reverse of broadcasting).
#include "ops/core/autocast.h"
#include "ops/core/dispatch.h"
#include "ops/elementwise/binary.h"
#include "ops/elementwise/copy.h"
#include "ops/reduce/cpu/reduce.h"
#include "ops/reduce/reduce.h"
#include "ops/reduce/reduce_functors.h"
#include "ops/reduce/reduce_op.h"
#include "ops/shape/view.h"

#ifdef TG_WITH_CUDA
#include "ops/reduce/cuda/reduce.h"
#endif

namespace tg {
namespace {

// out = sum (or mean) of x over `mask`; x is converted to out's dtype first when they differ.
void run_sum(const Tensor& x, const std::vector<bool>& mask, Tensor& out, bool mean) {
  const Tensor src = x.dtype() == out.dtype() ? x : to(x, x.device(), out.dtype());
  const ReducePlan plan = make_reduce_plan(src.sizes(), src.strides(), mask);
#ifdef TG_WITH_CUDA
  if (out.is_cuda()) {
    cuda::sum_reduce(src, plan, out, mean);
    return;
  }
#endif
  TG_DISPATCH_NUMERIC(out.dtype(), mean ? "mean" : "sum", [&] {
    // Floating sums accumulate in double on the CPU: float32 sums of thousands of elements then
    // round once, where float accumulation in blocks of 1024 strayed 13x further than PyTorch's.
    using acc_t = std::conditional_t<is_floating_v<scalar_t>, double, scalar_t>;
    const scalar_t* in = src.data_ptr<scalar_t>();
    scalar_t* dst = out.data_ptr<scalar_t>();
    const auto count = static_cast<acc_t>(plan.n_red);
    cpu::reduce(
        plan, acc_t(0), [in](int64_t off, int64_t, int64_t) { return acc_t(in[off]); }, SumCombine{},
        [&](int64_t o, acc_t acc) { dst[o] = static_cast<scalar_t>(mean ? acc / count : acc); });
  });
}

// The dtype sum produces: the requested one, else int64 for integers and bools, else the input's.
DType sum_dtype(DType input, std::optional<DType> requested) {
  if (requested) {
    TG_CHECK(*requested != kBool, "[sum] dtype bool is not supported for the result; use int64");
    return *requested;
  }
  return is_integral(input, true) ? kInt64 : input;
}

class SumOp final : public DimReduceOp {
 public:
  SumOp(Shape dims, bool keepdim, std::optional<DType> dtype) : DimReduceOp(std::move(dims), keepdim), dtype_(dtype) {}
  const OpSchema& schema() const override {
    static const OpSchema s{.name = "sum"};
    return s;
  }
  std::vector<TensorMeta> infer(const TensorList& in) const override {
    const Tensor& x = in[0];
    const auto m = mask(x.dim());
    return single_output(contiguous_meta(reduced_sizes(x.sizes(), m, keepdim_), sum_dtype(x.dtype(), dtype_), x.device()));
  }
  void eval(const TensorList& in, TensorList& out) const override { run_sum(in[0], mask(in[0].dim()), out[0], false); }
  TensorList backward(const BackwardContext& ctx, const TensorList& grads) const override {
    const TensorMeta& m = ctx.input_meta(0);
    Tensor g = expand_to_input(grads[0], m.sizes);
    return {g.dtype() == m.dtype ? g : to(g, g.device(), m.dtype)};
  }
  SaveSpec saves() const override { return {.inputs = false}; }
  std::string attrs() const override {
    return DimReduceOp::attrs() + (dtype_ ? ", dtype=" + std::string(dtype_name(*dtype_)) : "");
  }

 private:
  std::optional<DType> dtype_;
};

class MeanOp final : public DimReduceOp {
 public:
  using DimReduceOp::DimReduceOp;
  const OpSchema& schema() const override {
    static const OpSchema s{.name = "mean"};
    return s;
  }
  std::vector<TensorMeta> infer(const TensorList& in) const override {
    const Tensor& x = in[0];
    TG_CHECK(is_floating(x.dtype()), "[mean] could not infer output dtype: input dtype must be floating point "
             "(float16, bfloat16, float32 or float64), got ", dtype_name(x.dtype()), "; convert with to(kFloat32) first");
    const auto m = mask(x.dim());
    return single_output(contiguous_meta(reduced_sizes(x.sizes(), m, keepdim_), x.dtype(), x.device()));
  }
  void eval(const TensorList& in, TensorList& out) const override { run_sum(in[0], mask(in[0].dim()), out[0], true); }
  TensorList backward(const BackwardContext& ctx, const TensorList& grads) const override {
    const TensorMeta& m = ctx.input_meta(0);
    const int64_t n = reduced_count(m.sizes, mask(static_cast<int64_t>(m.sizes.size())));
    return {div(expand_to_input(grads[0], m.sizes), Scalar(n))};
  }
  SaveSpec saves() const override { return {.inputs = false}; }
};

// Sums x down to `sizes_`: the leading dims x has in excess, and dims where sizes_ is 1.
class SumToSizeOp final : public Op {
 public:
  explicit SumToSizeOp(Shape sizes) : sizes_(std::move(sizes)) {}
  const OpSchema& schema() const override {
    static const OpSchema s{.name = "sum_to_size"};
    return s;
  }
  static std::vector<bool> mask_for(const Shape& from, const Shape& to) {
    const size_t lead = from.size() - to.size();
    std::vector<bool> m(from.size(), true);
    for (size_t i = 0; i < to.size(); ++i) m[lead + i] = to[i] == 1 && from[lead + i] != 1;
    return m;
  }
  std::vector<TensorMeta> infer(const TensorList& in) const override {
    const Tensor& x = in[0];
    bool ok = sizes_.size() <= x.sizes().size();
    for (size_t i = 0; ok && i < sizes_.size(); ++i) {
      const int64_t have = x.sizes()[x.sizes().size() - sizes_.size() + i];
      ok = sizes_[i] == have || sizes_[i] == 1;
    }
    TG_CHECK(ok, "[sum_to_size] size ", shape_str(sizes_), " is not expandable to size ", shape_str(x.sizes()));
    return single_output(contiguous_meta(sizes_, x.dtype(), x.device()));
  }
  void eval(const TensorList& in, TensorList& out) const override {
    run_sum(in[0], mask_for(in[0].sizes(), sizes_), out[0], false);
  }
  TensorList backward(const BackwardContext& ctx, const TensorList& grads) const override {
    return {expand(grads[0], ctx.input_meta(0).sizes)};
  }
  SaveSpec saves() const override { return {.inputs = false}; }
  std::string attrs() const override { return "size=" + shape_str(sizes_); }

 private:
  Shape sizes_;
};

}  // namespace

// sum is on PyTorch's CUDA autocast list of ops that run in float32 when no dtype is asked for.
Tensor sum(const Tensor& x, const Shape& dims, bool keepdim, std::optional<DType> dtype) {
  return call_op<SumOp>({dtype ? x : autocast::to_float(x, autocast::kCudaList)}, dims, keepdim, dtype);
}

Tensor mean(const Tensor& x, const Shape& dims, bool keepdim) { return call_op<MeanOp>({x}, dims, keepdim); }

Tensor sum_to(const Tensor& x, const Shape& sizes) {
  if (x.sizes() == sizes) return x;
  // Reducing only over dims of size 1 moves no data: a reshape says the same thing for free.
  bool only_unit_dims = sizes.size() <= x.sizes().size();
  for (size_t i = 0; only_unit_dims && i < x.sizes().size(); ++i) {
    const size_t lead = x.sizes().size() - sizes.size();
    const bool reduced = i < lead || (sizes[i - lead] == 1 && x.sizes()[i] != 1);
    if (reduced && x.sizes()[i] != 1) only_unit_dims = false;
    if (!reduced && sizes[i - lead] != x.sizes()[i]) only_unit_dims = false;
  }
  if (only_unit_dims) return reshape(x, sizes);
  return call_op<SumToSizeOp>({x}, sizes);
}

Tensor Tensor::sum(std::optional<DType> dtype) const { return tg::sum(*this, {}, false, dtype); }
Tensor Tensor::sum(const Shape& dims, bool keepdim, std::optional<DType> dtype) const {
  return tg::sum(*this, dims, keepdim, dtype);
}
Tensor Tensor::mean() const { return tg::mean(*this); }
Tensor Tensor::mean(const Shape& dims, bool keepdim) const { return tg::mean(*this, dims, keepdim); }

}  // namespace tg
