// var: variance over dims with a correction (Bessel's by default).
#include <algorithm>

#include "ops/core/dispatch.h"
#include "ops/core/widen.h"
#include "ops/elementwise/binary.h"
#include "ops/reduce/cpu/reduce.h"
#include "ops/reduce/reduce.h"
#include "ops/reduce/reduce_functors.h"
#include "ops/reduce/reduce_op.h"

#ifdef TG_WITH_CUDA
#include "ops/reduce/cuda/reduce.h"
#endif

namespace tg {
namespace {

class VarOp final : public DimReduceOp {
 public:
  VarOp(Shape dims, int64_t correction, bool keepdim)
      : DimReduceOp(std::move(dims), keepdim), correction_(correction) {}
  const OpSchema& schema() const override {
    static const OpSchema s{.name = "var"};
    return s;
  }
  std::vector<TensorMeta> infer(const TensorList& in) const override {
    const Tensor& x = in[0];
    TG_CHECK(is_floating(x.dtype()), "[var] std and var only support floating point dtypes, got ",
             dtype_name(x.dtype()));
    const auto m = mask(x.dim());
    return single_output(contiguous_meta(reduced_sizes(x.sizes(), m, keepdim_), x.dtype(), x.device()));
  }
  void eval(const TensorList& in, TensorList& out) const override {
    if (eval_widened(*this, in, out)) return;  // 16-bit floats compute in float32
    const Tensor& x = in[0];
    const ReducePlan plan = make_reduce_plan(x.sizes(), x.strides(), mask(x.dim()));
#ifdef TG_WITH_CUDA
    if (out[0].is_cuda()) {
      cuda::var_reduce(x, plan, out[0], correction_);
      return;
    }
#endif
    TG_DISPATCH_FLOATING(x.dtype(), "var", [&] {
      using acc_t = acc_type<scalar_t>;  // 16-bit floats accumulate in float
      const scalar_t* src = x.data_ptr<scalar_t>();
      scalar_t* dst = out[0].data_ptr<scalar_t>();
      // Two passes (mean, then squared deviations) avoid the cancellation of E[x^2] - E[x]^2.
      std::vector<acc_t> means(static_cast<size_t>(plan.n_out));
      const auto count = static_cast<acc_t>(plan.n_red);
      cpu::reduce(
          plan, acc_t(0), [src](int64_t off, int64_t, int64_t) { return acc_t(src[off]); }, SumCombine{},
          [&](int64_t o, acc_t acc) { means[static_cast<size_t>(o)] = acc / count; });
      const auto divisor = static_cast<acc_t>(std::max<int64_t>(0, plan.n_red - correction_));
      cpu::reduce(
          plan, acc_t(0),
          [&](int64_t off, int64_t o, int64_t) {
            const acc_t d = acc_t(src[off]) - means[static_cast<size_t>(o)];
            return d * d;
          },
          SumCombine{}, [&](int64_t o, acc_t acc) { dst[o] = acc / divisor; });
    });
  }
  // d var / dx = 2 (x - mean) / (n - correction), broadcast from the reduced gradient.
  TensorList backward(const BackwardContext& ctx, const TensorList& grads) const override {
    const Tensor x = ctx.input(0);
    const auto m = mask(x.dim());
    const int64_t divisor = std::max<int64_t>(0, reduced_count(x.sizes(), m) - correction_);
    const Tensor centered = sub(x, mean(x, dims_, true));
    return {mul(mul(centered, as_keepdim(grads[0], x.sizes())), Scalar(2.0 / static_cast<double>(divisor)))};
  }
  std::string attrs() const override { return DimReduceOp::attrs() + ", correction=" + std::to_string(correction_); }

 private:
  int64_t correction_;
};

}  // namespace

Tensor var(const Tensor& x, const Shape& dims, int64_t correction, bool keepdim) {
  return call_op<VarOp>({x}, dims, correction, keepdim);
}

Tensor Tensor::var(const Shape& dims, int64_t correction, bool keepdim) const {
  return tg::var(*this, dims, correction, keepdim);
}

}  // namespace tg
