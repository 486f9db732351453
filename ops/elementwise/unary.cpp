// Elementwise functions of one tensor: neg, abs, square, sgn, exp, log, sin, cos, erf, tanh, sigmoid,
// relu, gelu, silu, softplus, sqrt, rsqrt, trunc, pow with a scalar exponent, clamp, and the in-place
// trunc_ and clamp_. (clamp with tensor bounds lives in ops/elementwise/clamp_tensor.cpp.)
#include "ops/elementwise/unary.h"

#include <iterator>

#include "ops/core/autocast.h"
#include "ops/core/dispatch.h"
#include "ops/elementwise/binary.h"
#include "ops/elementwise/compare.h"
#include "ops/elementwise/cpu/elementwise.h"
#include "ops/elementwise/elementwise.h"
#include "ops/elementwise/pointwise.h"
#include "ops/factory/factory.h"

#ifdef TG_WITH_CUDA
#include "ops/elementwise/cuda/elementwise.h"
#endif

namespace tg {
namespace {

constexpr uint32_t kEw = kElementwise;

#define TG_UNARY_SCHEMA(K, NAME, ...) OpSchema{NAME, kEw},
const OpSchema kSchemas[] = {TG_UNARY_KINDS(TG_UNARY_SCHEMA)};
#undef TG_UNARY_SCHEMA
static_assert(std::size(kSchemas) == kUnaryKinds, "one schema per UnaryKind");
const OpSchema kTruncInPlace{"trunc_", kEw | kInPlace, 0};
const OpSchema kClampInPlace{"clamp_", kEw | kInPlace, 0};

Scalar minus_one(const Scalar& e) { return e.is_floating() ? Scalar(e.to_double() - 1) : Scalar(e.to_int() - 1); }

class UnaryOp final : public Op {
 public:
  UnaryOp(UnaryKind kind, bool inplace, EwParams params = {}) : kind_(kind), inplace_(inplace), p_(std::move(params)) {}

  const OpSchema& schema() const override {
    if (inplace_) return kind_ == UnaryKind::Clamp ? kClampInPlace : kTruncInPlace;
    return kSchemas[static_cast<int>(kind_)];
  }

  std::vector<TensorMeta> infer(const TensorList& in) const override {
    const char* op = schema().name.data();
    const DType r = result_dtype(op, in[0].dtype());
    if (inplace_) {
      check_inplace(op, in[0], {}, r);
      return single_output(meta_of(in[0]));
    }
    return single_output(elementwise_meta(op, {&in[0]}, r));
  }

  void eval(const TensorList& in, TensorList& out) const override {
    const TensorIter it = TensorIter::make(out[0], {&in[0]});
    const DType compute = result_dtype(schema().name.data(), in[0].dtype());
#ifdef TG_WITH_CUDA
    if (out[0].is_cuda()) {
      cuda::launch_unary(kind_, compute, p_, it);
      return;
    }
#endif
    cpu::launch_unary(kind_, compute, p_, it);
  }

  bool pointwise(const std::vector<TensorMeta>& in, PointwiseMath& math) const override {
    if (inplace_) return false;
    math.family = PointwiseFamily::Unary;
    math.unary = kind_;
    math.compute = result_dtype(schema().name.data(), in[0].dtype);
    math.params = p_;
    return true;
  }

  TensorList backward(const BackwardContext& ctx, const TensorList& grads) const override {
    if (!ctx.needs_input_grad(0)) return {Tensor()};
    const Tensor g = grad_of_input(ctx, grads[0]);
    return {g.defined() ? reduce_grad(g, ctx.input_meta(0)) : g};
  }

  SaveSpec saves() const override {
    if (kind_ == UnaryKind::Pow) return {.inputs = p_.exponent.to_double() != 0.0};  // x^0 has a zero gradient
    switch (unary_info(kind_).saves) {
      case UnarySaves::Nothing: return {.inputs = false};
      case UnarySaves::Input: return {};
      case UnarySaves::Output: return {.inputs = false, .outputs = true};
    }
    return {};
  }

  std::string attrs() const override {
    switch (kind_) {
      case UnaryKind::Pow: return "exponent=" + scalar_str(p_.exponent);
      case UnaryKind::GeluTanh: return "approximate=tanh";
      case UnaryKind::Softplus: return "beta=" + scalar_str(p_.beta) + ", threshold=" + scalar_str(p_.threshold);
      case UnaryKind::Clamp: {
        std::string s = p_.lo ? "min=" + scalar_str(*p_.lo) : "";
        if (p_.hi) s += (s.empty() ? "max=" : ", max=") + scalar_str(*p_.hi);
        return s;
      }
      default: return {};
    }
  }

 private:
  // The compute (and result) dtype: the list's domain, or the kind's own promotion rule.
  DType result_dtype(const char* op, DType x) const {
    switch (kind_) {
      case UnaryKind::Neg:
        TG_CHECK(x != kBool, "[", op, "] negation, the `-` operator, on a bool tensor is not supported. If you are "
                 "trying to invert a mask, use the `~` or logical_not() operator instead.");
        return x;
      case UnaryKind::Pow: {
        const DType r = promote_with_scalar(x, p_.exponent.kind());
        TG_CHECK(r != kBool, "[", op, "] is not supported for a bool tensor with a bool exponent");
        TG_CHECK(is_floating(r) || p_.exponent.to_int() >= 0, "[", op,
                 "] integers to negative integer powers are not allowed (exponent ", scalar_str(p_.exponent), ")");
        return r;
      }
      case UnaryKind::Clamp: {
        TG_CHECK(p_.lo || p_.hi, "[", op, "] at least one of 'min' or 'max' must not be None");
        DType r = x;
        if (p_.lo) r = promote_with_scalar(r, p_.lo->kind());
        if (p_.hi) r = promote_with_scalar(r, p_.hi->kind());
        TG_CHECK(r != kBool, "[", op, "] is not supported for bool tensors");
        return r;
      }
      default: break;
    }
    switch (unary_info(kind_).domain) {
      case EwDomain::All: return x;
      case EwDomain::Numeric: TG_CHECK(x != kBool, "[", op, "] is not supported for bool tensors"); return x;
      case EwDomain::Floating:
        TG_CHECK(is_floating(x), "[", op, "] expected a floating point tensor, got ", dtype_name(x));
        return x;
      case EwDomain::FloatLift: return is_floating(x) ? x : kDefaultFloat;
    }
    return x;
  }

  // dL/dx before reduce_grad; undefined means zero.
  Tensor grad_of_input(const BackwardContext& ctx, const Tensor& g) const {
    switch (kind_) {
      case UnaryKind::Neg: return neg(g);
      case UnaryKind::Abs: return mul(g, sgn(ctx.input(0)));
      case UnaryKind::Square: return mul(g, mul(ctx.input(0), 2));  // PyTorch's pow_backward for exponent 2
      case UnaryKind::Sgn:
      case UnaryKind::Trunc: return zeros_like(g);
      case UnaryKind::Exp: return mul(g, ctx.output(0));
      case UnaryKind::Log: return div(g, ctx.input(0));
      case UnaryKind::Sin: return mul(g, cos(ctx.input(0)));
      case UnaryKind::Cos: return mul(g, neg(sin(ctx.input(0))));
      case UnaryKind::Erf: {  // 2/sqrt(pi) exp(-x^2), in PyTorch's order of operations
        const Tensor x = ctx.input(0);
        return mul(mul(exp(neg(mul(x, x))), 1.12837916709551257390), g);  // 2/sqrt(pi)
      }
      case UnaryKind::Tanh: return tanh_backward(g, ctx.output(0));
      case UnaryKind::Sigmoid: return sigmoid_backward(g, ctx.output(0));
      case UnaryKind::Relu: return threshold_backward(g, ctx.output(0));
      case UnaryKind::Gelu: return gelu_backward(g, ctx.input(0), false);
      case UnaryKind::GeluTanh: return gelu_backward(g, ctx.input(0), true);
      case UnaryKind::Silu: return silu_backward(g, ctx.input(0));
      case UnaryKind::Softplus: {
        // sigmoid(beta x) below the threshold, 1 above it (where the forward returned x itself).
        const Tensor bx = mul(ctx.input(0), p_.beta);
        return where(gt(bx, p_.threshold), g, mul(g, sigmoid(bx)));
      }
      case UnaryKind::Sqrt: return div(g, mul(ctx.output(0), 2));
      case UnaryKind::Rsqrt: return mul(mul(g, pow(ctx.output(0), 3)), -0.5);
      case UnaryKind::Pow: {
        const Scalar& e = p_.exponent;
        if (e.to_double() == 0.0) return zeros_like(g);
        if (e.to_double() == 1.0) return g;
        return mul(g, mul(pow(ctx.input(0), minus_one(e)), e));
      }
      case UnaryKind::Clamp: {
        // Gradient flows where min <= x <= max (both ends included), as in PyTorch.
        const Tensor x = ctx.input(0);
        Tensor mask;
        if (p_.lo) mask = ge(x, *p_.lo);
        if (p_.hi) mask = mask.defined() ? mul(mask, le(x, *p_.hi)) : le(x, *p_.hi);
        return where(mask, g, zeros({}, {.dtype = g.dtype(), .device = g.device()}));
      }
    }
    return Tensor();
  }

  UnaryKind kind_;
  bool inplace_;
  EwParams p_;
};

Tensor unary(UnaryKind kind, const Tensor& x, EwParams p = {}) {
  return call_op<UnaryOp>({x}, kind, false, std::move(p));
}

EwParams clamp_params(std::optional<Scalar> min, std::optional<Scalar> max) {
  EwParams p;
  p.lo = min;
  p.hi = max;
  return p;
}

}  // namespace

Tensor neg(const Tensor& x) { return unary(UnaryKind::Neg, x); }
Tensor abs(const Tensor& x) { return unary(UnaryKind::Abs, x); }
// As torch.square (pow(x, 2)): a bool tensor squares into int64, and CUDA autocast runs it in
// float32 as it runs pow.
Tensor square(const Tensor& x) {
  return x.dtype() == kBool ? pow(x, 2) : unary(UnaryKind::Square, autocast::to_float(x, autocast::kCudaList));
}
Tensor sgn(const Tensor& x) { return unary(UnaryKind::Sgn, x); }
// exp, log, rsqrt, pow and softplus are on PyTorch's CUDA autocast float32 list (not the CPU's).
Tensor exp(const Tensor& x) { return unary(UnaryKind::Exp, autocast::to_float(x, autocast::kCudaList)); }
Tensor log(const Tensor& x) { return unary(UnaryKind::Log, autocast::to_float(x, autocast::kCudaList)); }
Tensor sin(const Tensor& x) { return unary(UnaryKind::Sin, x); }
Tensor cos(const Tensor& x) { return unary(UnaryKind::Cos, x); }
Tensor erf(const Tensor& x) { return unary(UnaryKind::Erf, x); }
Tensor tanh(const Tensor& x) { return unary(UnaryKind::Tanh, x); }
Tensor sigmoid(const Tensor& x) { return unary(UnaryKind::Sigmoid, x); }
Tensor relu(const Tensor& x) { return unary(UnaryKind::Relu, x); }
Tensor sqrt(const Tensor& x) { return unary(UnaryKind::Sqrt, x); }
Tensor rsqrt(const Tensor& x) { return unary(UnaryKind::Rsqrt, autocast::to_float(x, autocast::kCudaList)); }
Tensor silu(const Tensor& x) { return unary(UnaryKind::Silu, x); }

Tensor softplus(const Tensor& x, Scalar beta, Scalar threshold) {
  EwParams p;
  p.beta = beta;
  p.threshold = threshold;
  return unary(UnaryKind::Softplus, autocast::to_float(x, autocast::kCudaList), std::move(p));
}
Tensor trunc(const Tensor& x) { return unary(UnaryKind::Trunc, x); }

Tensor gelu(const Tensor& x, const std::string& approximate) {
  TG_CHECK(approximate == "none" || approximate == "tanh", "[gelu] approximate must be \"none\" or \"tanh\", got \"",
           approximate, "\"");
  return unary(approximate == "tanh" ? UnaryKind::GeluTanh : UnaryKind::Gelu, x);
}

void gelu_into(const Tensor& x, const std::string& approximate, const Tensor& out) {
  TG_CHECK(approximate == "none" || approximate == "tanh", "[gelu] approximate must be \"none\" or \"tanh\", got \"",
           approximate, "\"");
  TG_CHECK(out.sizes() == x.sizes() && out.dtype() == x.dtype() && out.device() == x.device(), "[gelu] output of shape ",
           shape_str(out.sizes()), " and dtype ", dtype_name(out.dtype()), " for input of shape ", shape_str(x.sizes()),
           " and dtype ", dtype_name(x.dtype()), ": expected the input's shape, dtype and device");
  const UnaryOp op(approximate == "tanh" ? UnaryKind::GeluTanh : UnaryKind::Gelu, false);
  TensorList result{out};
  op.eval({x}, result);
}

Tensor pow(const Tensor& x, Scalar exponent) {
  EwParams p;
  p.exponent = exponent;
  return unary(UnaryKind::Pow, autocast::to_float(x, autocast::kCudaList), std::move(p));
}

Tensor clamp(const Tensor& x, std::optional<Scalar> min, std::optional<Scalar> max) {
  return unary(UnaryKind::Clamp, x, clamp_params(min, max));
}

Tensor Tensor::neg() const { return tg::neg(*this); }
Tensor Tensor::pow(Scalar exponent) const { return tg::pow(*this, exponent); }
Tensor Tensor::abs() const { return tg::abs(*this); }
Tensor Tensor::sgn() const { return tg::sgn(*this); }
Tensor Tensor::exp() const { return tg::exp(*this); }
Tensor Tensor::log() const { return tg::log(*this); }
Tensor Tensor::sin() const { return tg::sin(*this); }
Tensor Tensor::cos() const { return tg::cos(*this); }
Tensor Tensor::tanh() const { return tg::tanh(*this); }
Tensor Tensor::sigmoid() const { return tg::sigmoid(*this); }
Tensor Tensor::relu() const { return tg::relu(*this); }
Tensor Tensor::gelu(const std::string& approximate) const { return tg::gelu(*this, approximate); }
Tensor Tensor::sqrt() const { return tg::sqrt(*this); }
Tensor Tensor::square() const { return tg::square(*this); }
Tensor Tensor::rsqrt() const { return tg::rsqrt(*this); }
Tensor Tensor::erf() const { return tg::erf(*this); }
Tensor Tensor::trunc() const { return tg::trunc(*this); }
Tensor Tensor::clamp(std::optional<Scalar> min, std::optional<Scalar> max) const { return tg::clamp(*this, min, max); }

Tensor& Tensor::trunc_() {
  call_op<UnaryOp>({*this}, UnaryKind::Trunc, true);
  return *this;
}

Tensor& Tensor::clamp_(std::optional<Scalar> min, std::optional<Scalar> max) {
  call_op<UnaryOp>({*this}, UnaryKind::Clamp, true, clamp_params(min, max));
  return *this;
}

}  // namespace tg
