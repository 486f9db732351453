// softmax and log_softmax along one dim, with fused backward kernels that are themselves differentiable.
#include "ops/norm/softmax.h"

#include <cmath>
#include <type_traits>

#include "ops/core/autocast.h"
#include "ops/core/dispatch.h"
#include "ops/core/widen.h"
#include "ops/elementwise/binary.h"
#include "ops/elementwise/cpu/span_math.h"
#include "ops/elementwise/unary.h"
#include "ops/norm/softmax_rows.h"
#include "ops/reduce/reduce.h"
#include "ops/reduce/reduce_functors.h"

#ifdef TG_WITH_CUDA
#include "ops/norm/cuda/softmax.h"
#endif

namespace tg {
namespace {

// The maximum of a row of n elements `stride` apart (a contiguous float row: vectorized).
template <typename T>
T row_max(const T* x, int64_t n, int64_t stride) {
  if constexpr (std::is_floating_point_v<T>) {
    if (stride == 1 && n > 0) return cpu::max_of_span(x, n);
  }
  T m = max_identity<T>();
  for (int64_t j = 0; j < n; ++j) m = MaxCombine{}(m, x[j * stride]);
  return m;
}

// The CPU row loop for every SoftmaxMode.
template <typename T>
void softmax_rows_cpu(SoftmaxMode mode, const Tensor& a, const Tensor& b, int64_t dim, Tensor& out) {
  const RowGeometry ga = row_geometry(a, dim);
  const RowGeometry gb = b.defined() ? row_geometry(b, dim) : RowGeometry{};
  const RowGeometry go = row_geometry(out, dim);
  const T* pa = a.data_ptr<T>();
  const T* pb = b.defined() ? b.data_ptr<T>() : nullptr;
  T* po = out.data_ptr<T>();
  const int64_t n = ga.length;
  for (int64_t row = 0; row < ga.n_rows; ++row) {
    const T* x = pa + offset_at(ga.rows, row);
    const T* y = pb ? pb + offset_at(gb.rows, row) : nullptr;
    T* o = po + offset_at(go.rows, row);
    const int64_t sa = ga.stride, sb = gb.stride, so = go.stride;
    switch (mode) {
      case SoftmaxMode::Softmax:
      case SoftmaxMode::LogSoftmax: {
        const T m = row_max(x, n, sa);
        T s = 0;
        if constexpr (std::is_floating_point_v<T>) {
          if (mode == SoftmaxMode::Softmax) {
            // Each exponential once: written to the output, summed, then divided in place (the same
            // values as computing it twice; 16-bit outputs would round it in between, so they
            // compute it twice).
            for (int64_t j = 0; j < n; ++j) s += (o[j * so] = std::exp(x[j * sa] - m));
            if (so == 1) cpu::divide_span(o, s, n);
            else
              for (int64_t j = 0; j < n; ++j) o[j * so] = o[j * so] / s;
            break;
          }
        }
        for (int64_t j = 0; j < n; ++j) s += std::exp(x[j * sa] - m);
        if (mode == SoftmaxMode::Softmax) {
          for (int64_t j = 0; j < n; ++j) o[j * so] = std::exp(x[j * sa] - m) / s;
        } else {
          const T log_s = std::log(s);  // (x - m) - log(s): m + log(s) would round away small differences
          for (int64_t j = 0; j < n; ++j) o[j * so] = (x[j * sa] - m) - log_s;
        }
        break;
      }
      case SoftmaxMode::SoftmaxBackward: {  // y * (g - sum(g * y))
        T s = 0;
        for (int64_t j = 0; j < n; ++j) s += x[j * sa] * y[j * sb];
        for (int64_t j = 0; j < n; ++j) o[j * so] = y[j * sb] * (x[j * sa] - s);
        break;
      }
      case SoftmaxMode::LogSoftmaxBackward: {  // g - exp(y) * sum(g)
        T s = 0;
        for (int64_t j = 0; j < n; ++j) s += x[j * sa];
        for (int64_t j = 0; j < n; ++j) o[j * so] = x[j * sa] - std::exp(y[j * sb]) * s;
        break;
      }
    }
  }
}

void run_rows(SoftmaxMode mode, const Tensor& a, const Tensor& b, int64_t dim, Tensor& out) {
#ifdef TG_WITH_CUDA
  if (out.is_cuda()) {
    cuda::softmax_rows(mode, a, b, dim, out);
    return;
  }
#endif
  TG_DISPATCH_FLOATING(a.dtype(), "softmax", [&] { softmax_rows_cpu<scalar_t>(mode, a, b, dim, out); });
}

// Shared by the four ops: one dim, floating inputs of equal sizes and dtype.
class RowOp : public Op {
 public:
  explicit RowOp(int64_t dim) : dim_(dim) {}
  std::vector<TensorMeta> infer(const TensorList& in) const override {
    const char* op = schema().name.data();
    const Tensor& a = in[0];
    check_floating(op, a);
    wrap_dim(dim_, a.dim(), op);
    if (in.size() > 1) {
      TG_CHECK(in[1].sizes() == a.sizes() && in[1].dtype() == a.dtype(), "[", op, "] grad_output ",
               shape_str(a.sizes()), " ", dtype_name(a.dtype()), " does not match output ", shape_str(in[1].sizes()),
               " ", dtype_name(in[1].dtype()));
    }
    return single_output(contiguous_meta(a.sizes(), a.dtype(), common_device(op, in)));
  }
  std::string attrs() const override { return "dim=" + std::to_string(dim_); }

 protected:
  int64_t wrapped(const Tensor& t) const { return wrap_dim(dim_, t.dim(), schema().name.data()); }
  void run(SoftmaxMode mode, const TensorList& in, TensorList& out) const {
    if (eval_widened(*this, in, out)) return;  // 16-bit floats compute in float32
    run_rows(mode, in[0], in.size() > 1 ? in[1] : Tensor(), wrapped(in[0]), out[0]);
  }
  int64_t dim_;
};

// grad_input = y * (g - sum(g * y, dim)), inputs (g, y).
class SoftmaxBackwardDataOp final : public RowOp {
 public:
  using RowOp::RowOp;
  const OpSchema& schema() const override {
    static const OpSchema s{.name = "_softmax_backward_data"};
    return s;
  }
  void eval(const TensorList& in, TensorList& out) const override { run(SoftmaxMode::SoftmaxBackward, in, out); }
  // Linear in g (and self-adjoint there); for y: h * (g - sum(g y)) - g * sum(h y).
  TensorList backward(const BackwardContext& ctx, const TensorList& grads) const override {
    const Tensor& h = grads[0];
    const Tensor g = ctx.input(0), y = ctx.input(1);
    Tensor grad_g, grad_y;
    if (ctx.needs_input_grad(0)) grad_g = call_op<SoftmaxBackwardDataOp>({h, y}, dim_);
    if (ctx.needs_input_grad(1)) {
      const Shape d{dim_};
      grad_y = sub(mul(h, sub(g, sum(mul(g, y), d, true))), mul(g, sum(mul(h, y), d, true)));
    }
    return {grad_g, grad_y};
  }
};

// grad_input = g - exp(y) * sum(g, dim), inputs (g, y).
class LogSoftmaxBackwardDataOp final : public RowOp {
 public:
  using RowOp::RowOp;
  const OpSchema& schema() const override {
    static const OpSchema s{.name = "_log_softmax_backward_data"};
    return s;
  }
  void eval(const TensorList& in, TensorList& out) const override { run(SoftmaxMode::LogSoftmaxBackward, in, out); }
  // For g: h - sum(h * exp(y)); for y: -h * exp(y) * sum(g).
  TensorList backward(const BackwardContext& ctx, const TensorList& grads) const override {
    const Tensor& h = grads[0];
    const Tensor g = ctx.input(0), y = ctx.input(1);
    const Shape d{dim_};
    const Tensor e = exp(y);
    Tensor grad_g, grad_y;
    if (ctx.needs_input_grad(0)) grad_g = sub(h, sum(mul(h, e), d, true));
    if (ctx.needs_input_grad(1)) grad_y = neg(mul(mul(h, e), sum(g, d, true)));
    return {grad_g, grad_y};
  }
};

class SoftmaxOp final : public RowOp {
 public:
  using RowOp::RowOp;
  const OpSchema& schema() const override {
    static const OpSchema s{.name = "softmax"};
    return s;
  }
  void eval(const TensorList& in, TensorList& out) const override { run(SoftmaxMode::Softmax, in, out); }
  TensorList backward(const BackwardContext& ctx, const TensorList& grads) const override {
    return {call_op<SoftmaxBackwardDataOp>({grads[0], ctx.output(0)}, dim_)};
  }
  SaveSpec saves() const override { return {.inputs = false, .outputs = true}; }
};

class LogSoftmaxOp final : public RowOp {
 public:
  using RowOp::RowOp;
  const OpSchema& schema() const override {
    static const OpSchema s{.name = "log_softmax"};
    return s;
  }
  void eval(const TensorList& in, TensorList& out) const override { run(SoftmaxMode::LogSoftmax, in, out); }
  TensorList backward(const BackwardContext& ctx, const TensorList& grads) const override {
    return {call_op<LogSoftmaxBackwardDataOp>({grads[0], ctx.output(0)}, dim_)};
  }
  SaveSpec saves() const override { return {.inputs = false, .outputs = true}; }
};

}  // namespace

// On PyTorch's CUDA autocast float32 list; its CPU list does not hold them.
Tensor softmax(const Tensor& x, int64_t dim) {
  return call_op<SoftmaxOp>({autocast::to_float(x, autocast::kCudaList)}, dim);
}
Tensor log_softmax(const Tensor& x, int64_t dim) {
  return call_op<LogSoftmaxOp>({autocast::to_float(x, autocast::kCudaList)}, dim);
}

Tensor Tensor::softmax(int64_t dim) const { return tg::softmax(*this, dim); }
Tensor Tensor::log_softmax(int64_t dim) const { return tg::log_softmax(*this, dim); }

}  // namespace tg
