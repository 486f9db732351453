// Binary arithmetic (add, sub, mul, div, maximum, minimum, pow with a tensor exponent, their in-place
// and scalar forms) and the fused gradient kernels of tanh, sigmoid, relu, gelu and silu, which are
// binary ops of (grad, value).
#include "ops/elementwise/binary.h"

#include <array>
#include <iterator>
#include <cmath>

#include "ops/core/autocast.h"
#include "ops/core/dispatch.h"
#include "ops/elementwise/compare.h"
#include "ops/elementwise/cpu/elementwise.h"
#include "ops/elementwise/elementwise.h"
#include "ops/elementwise/elementwise_math.h"
#include "ops/elementwise/pointwise.h"
#include "ops/elementwise/unary.h"
#include "ops/factory/factory.h"

#ifdef TG_WITH_CUDA
#include "ops/elementwise/cuda/elementwise.h"
#endif

namespace tg {
namespace {

constexpr uint32_t kEw = kElementwise;

#define TG_BINARY_SCHEMA(K, NAME, ...) OpSchema{NAME, kEw},
const OpSchema kOutOfPlace[] = {TG_BINARY_KINDS(TG_BINARY_SCHEMA)};
#undef TG_BINARY_SCHEMA
// Kinds without an in-place form have an empty name here (never dispatched).
#define TG_BINARY_SCHEMA(K, NAME, INPLACE, ...) OpSchema{INPLACE, kEw | kInPlace, 0},
const OpSchema kInPlaceSchemas[] = {TG_BINARY_KINDS(TG_BINARY_SCHEMA)};
#undef TG_BINARY_SCHEMA
static_assert(std::size(kOutOfPlace) == kBinaryKinds && std::size(kInPlaceSchemas) == kBinaryKinds,
              "one schema per BinaryKind");
const OpSchema kRsub{"rsub", kEw};
const OpSchema kRdiv{"rdiv", kEw};
const OpSchema kPowScalarBase{"pow", kEw};

Scalar negated(const Scalar& s) {
  return s.is_floating() ? Scalar(-s.to_double()) : Scalar(-s.to_int());
}

bool is_one(const Scalar& s) { return s.to_double() == 1.0; }

// A 0-dim zero on g's device, the "else" branch of gradient selections.
Tensor zero_like_scalar(const Tensor& g) { return zeros({}, {.dtype = g.dtype(), .device = g.device()}); }


// Elementwise arithmetic on two tensors, or on a tensor and a host scalar (side says which is which).
class BinaryOp final : public Op {
 public:
  BinaryOp(BinaryKind kind, bool inplace, Scalar alpha, ScalarSide side = ScalarSide::None, Scalar scalar = {})
      : kind_(kind), inplace_(inplace), side_(side), alpha_(alpha), scalar_(scalar) {}

  const OpSchema& schema() const override {
    if (inplace_) {
      const OpSchema& s = kInPlaceSchemas[static_cast<int>(kind_)];
      TG_CHECK(!s.name.empty(), "[", binary_info(kind_).name, "] has no in-place form");
      return s;
    }
    if (side_ == ScalarSide::Left) return kind_ == BinaryKind::Sub ? kRsub : kind_ == BinaryKind::Pow ? kPowScalarBase : kRdiv;
    return kOutOfPlace[static_cast<int>(kind_)];
  }

  std::vector<TensorMeta> infer(const TensorList& in) const override {
    if (inplace_) {
      validate_in_place(in);
      return single_output(meta_of(in[0]));
    }
    const char* op = schema().name.data();
    const DType r = result_dtype(in);
    validate(op, r);
    if (side_ != ScalarSide::None) return single_output(elementwise_meta(op, {&in[0]}, r));
    return single_output(elementwise_meta(op, {&in[0], &in[1]}, r));
  }

  void validate_in_place(const TensorList& in) const override {
    const char* op = schema().name.data();
    const DType r = result_dtype(in);
    validate(op, r);
    if (side_ == ScalarSide::None) {
      check_inplace(op, in[0], {&in[1]}, r);
    } else {
      check_inplace(op, in[0], {}, r);
    }
  }

  void eval(const TensorList& in, TensorList& out) const override {
    const Tensor& o = out[0];
    const DType compute = result_dtype(in);
    EwParams p;
    p.alpha = alpha_;
    if (side_ != ScalarSide::None) {
      p.side = side_;
      p.scalar = scalar_;
      run(compute, p, TensorIter::make(o, {&in[0]}), o);
      return;
    }
    const Tensor& a = in[0];
    const Tensor& b = in[1];
    if (is_host_scalar_operand(b, o) || is_host_scalar_operand(a, o)) {
      if (is_fused_gradient(kind_)) {  // rare: stage the host value rather than add kernel variants
        const Tensor a2 = a.to(o.device());
        const Tensor b2 = b.to(o.device());
        run(compute, p, TensorIter::make(o, {&a2, &b2}), o);
        return;
      }
      const bool right = is_host_scalar_operand(b, o);
      p.side = right ? ScalarSide::Right : ScalarSide::Left;
      p.scalar = scalar_of(right ? b : a);
      run(compute, p, TensorIter::make(o, {right ? &a : &b}), o);
      return;
    }
    run(compute, p, TensorIter::make(o, {&a, &b}), o);
  }

  bool pointwise(const std::vector<TensorMeta>& in, PointwiseMath& math) const override {
    if (inplace_) return false;
    math.family = PointwiseFamily::Binary;
    math.binary = kind_;
    math.compute = compute_dtype(side_ == ScalarSide::None ? result_type(in) : promote_with_scalar(in[0].dtype, scalar_.kind()));
    math.params.alpha = alpha_;
    math.params.side = side_;
    math.params.scalar = scalar_;
    return true;
  }

  TensorList backward(const BackwardContext& ctx, const TensorList& grads) const override {
    const Tensor& g = grads[0];
    TensorList gi(side_ == ScalarSide::None ? 2 : 1);
    if (side_ != ScalarSide::None) {
      gi[0] = scalar_backward(ctx, g);
    } else {
      tensor_backward(ctx, g, gi);
    }
    for (size_t i = 0; i < gi.size(); ++i) {
      if (gi[i].defined()) gi[i] = ctx.needs_input_grad(i) ? reduce_grad(gi[i], ctx.input_meta(i)) : Tensor();
    }
    return gi;
  }

  SaveSpec saves() const override {
    switch (kind_) {
      case BinaryKind::Add:
      case BinaryKind::Sub: return {.inputs = false};
      case BinaryKind::Mul: return {.inputs = side_ == ScalarSide::None};
      case BinaryKind::Div: return {.inputs = side_ != ScalarSide::Right};
      case BinaryKind::Pow: return {.inputs = true, .outputs = true};  // the exponent's gradient reads the result
      default: return {};
    }
  }

  std::string attrs() const override {
    std::string s;
    if (side_ != ScalarSide::None) s = (side_ == ScalarSide::Left && kind_ == BinaryKind::Pow ? "self=" : "other=") + scalar_str(scalar_);
    if (!is_one(alpha_)) s += (s.empty() ? "alpha=" : ", alpha=") + scalar_str(alpha_);
    if (kind_ == BinaryKind::GeluTanhBackward) s = "approximate=tanh";
    return s;
  }

 private:
  DType result_dtype(const TensorList& in) const {
    return compute_dtype(side_ == ScalarSide::None ? result_type({&in[0], &in[1]}) : result_type(in[0], scalar_));
  }

  // The dtype the functor runs in, from the operands' promoted dtype.
  DType compute_dtype(DType promoted) const {
    // Div lifts integer operands to float (true division).
    if (binary_info(kind_).domain == EwDomain::FloatLift && !is_floating(promoted)) return kDefaultFloat;
    return promoted;
  }

  void validate(const char* op, DType r) const {
    if (kind_ == BinaryKind::Sub) {
      TG_CHECK(r != kBool, "[", op, "] subtraction, the `-` operator, with bool tensors is not supported. Use the `^` "
               "or logical_xor() operator instead.");
    }
    if (kind_ == BinaryKind::Add || kind_ == BinaryKind::Sub) {
      TG_CHECK(alpha_.kind() != ScalarKind::Bool || r == kBool, "[", op,
               "] boolean alpha only supported for boolean results.");
      TG_CHECK(is_floating(r) || !alpha_.is_floating(), "[", op, "] for integral input tensors, argument alpha must "
               "not be a floating point number.");
    }
    if (binary_info(kind_).domain == EwDomain::Floating) {
      TG_CHECK(is_floating(r), "[", op, "] expected floating point tensors, got ",
               dtype_name(r));
    }
    if (kind_ == BinaryKind::Pow) TG_CHECK(r != kBool, "[", op, "] is not supported for bool base and exponent");
  }

  void run(DType compute, const EwParams& p, const TensorIter& it, const Tensor& out) const {
#ifdef TG_WITH_CUDA
    if (out.is_cuda()) {
      cuda::launch_binary(kind_, compute, p, it);
      return;
    }
#else
    (void)out;
#endif
    cpu::launch_binary(kind_, compute, p, it);
  }

  // Gradient of the one tensor input of a tensor-scalar op.
  Tensor scalar_backward(const BackwardContext& ctx, const Tensor& g) const {
    const bool left = side_ == ScalarSide::Left;
    switch (kind_) {
      case BinaryKind::Add: return g;
      case BinaryKind::Sub: return left ? neg(g) : g;
      case BinaryKind::Mul: return mul(g, scalar_);
      case BinaryKind::Div: {
        if (!left) return div(g, scalar_);
        const Tensor a = ctx.input(0);  // d(s / a)/da = -s / a^2
        return div(mul(g, negated(scalar_)), mul(a, a));
      }
      case BinaryKind::Pow: {
        const Tensor t = ctx.input(0);
        const Tensor zero = zero_like_scalar(g);
        if (!left) {  // t ^ s: as pow(Tensor, Scalar)
          if (scalar_.to_double() == 0.0) return zeros_like(g);
          const Scalar e1 = scalar_.is_floating() ? Scalar(scalar_.to_double() - 1) : Scalar(scalar_.to_int() - 1);
          return mul(g, mul(pow(t, e1), scalar_));
        }
        // s ^ t: out * log(s), and 0 where s == 0 and t >= 0 (PyTorch's pow_backward_exponent).
        const Tensor d = mul(ctx.output(0), std::log(scalar_.to_double()));
        return scalar_.to_double() == 0.0 ? mul(g, where(ge(t, 0), zero, d)) : mul(g, d);
      }
      default: TG_FAIL("[", name(), "] has no scalar form");
    }
  }

  void tensor_backward(const BackwardContext& ctx, const Tensor& g, TensorList& gi) const {
    const bool need_a = ctx.needs_input_grad(0);
    const bool need_b = ctx.needs_input_grad(1);
    switch (kind_) {
      case BinaryKind::Add:
        gi[0] = g;
        if (need_b) gi[1] = is_one(alpha_) ? g : mul(g, alpha_);
        return;
      case BinaryKind::Sub:
        gi[0] = g;
        if (need_b) gi[1] = is_one(alpha_) ? neg(g) : mul(g, negated(alpha_));
        return;
      case BinaryKind::Mul:
        if (need_a) gi[0] = mul(g, ctx.input(1));
        if (need_b) gi[1] = mul(g, ctx.input(0));
        return;
      case BinaryKind::Div: {
        const Tensor b = ctx.input(1);
        const Tensor q = div(g, b);
        gi[0] = q;
        if (need_b) gi[1] = neg(mul(q, div(ctx.input(0), b)));  // -g a / b^2
        return;
      }
      case BinaryKind::Pow: {
        // As PyTorch's pow_backward_self and pow_backward_exponent.
        const Tensor a = ctx.input(0);
        const Tensor b = ctx.input(1);
        const Tensor zero = zero_like_scalar(g);
        if (need_a) gi[0] = where(eq(b, 0), zero, mul(g, mul(b, pow(a, sub(b, 1)))));
        if (need_b) {
          const Tensor out = ctx.output(0);
          const Tensor base = a.dtype() == out.dtype() ? a : a.to(out.dtype());
          gi[1] = mul(g, where(mul(eq(a, 0), ge(b, 0)), zero, mul(out, log(base))));
        }
        return;
      }
      case BinaryKind::Maximum:
      case BinaryKind::Minimum: {
        // As PyTorch: ties split the gradient, the losing side gets none.
        const Tensor a = ctx.input(0);
        const Tensor b = ctx.input(1);
        const Tensor zero = zero_like_scalar(g);
        const Tensor shared = where(eq(a, b), mul(g, 0.5), g);
        const bool is_max = kind_ == BinaryKind::Maximum;
        if (need_a) gi[0] = where(is_max ? lt(a, b) : gt(a, b), zero, shared);
        if (need_b) gi[1] = where(is_max ? gt(a, b) : lt(a, b), zero, shared);
        return;
      }
      case BinaryKind::TanhBackward: {  // f(g, y) = g (1 - y^2)
        const Tensor y = ctx.input(1);
        if (need_a) gi[0] = tanh_backward(g, y);
        if (need_b) gi[1] = mul(mul(g, ctx.input(0)), mul(y, -2));
        return;
      }
      case BinaryKind::SigmoidBackward: {  // f(g, y) = g y (1 - y)
        const Tensor y = ctx.input(1);
        if (need_a) gi[0] = sigmoid_backward(g, y);
        if (need_b) gi[1] = mul(mul(g, ctx.input(0)), rsub(mul(y, 2), 1));
        return;
      }
      case BinaryKind::ThresholdBackward:  // piecewise constant in y
        if (need_a) gi[0] = threshold_backward(g, ctx.input(1));
        return;
      case BinaryKind::GeluBackward:
      case BinaryKind::GeluTanhBackward: {
        const bool approx = kind_ == BinaryKind::GeluTanhBackward;
        const Tensor x = ctx.input(1);
        if (need_a) gi[0] = gelu_backward(g, x, approx);
        if (need_b) gi[1] = mul(mul(g, ctx.input(0)), gelu_second_derivative(x, approx));
        return;
      }
      case BinaryKind::SiluBackward: {
        const Tensor x = ctx.input(1);
        if (need_a) gi[0] = silu_backward(g, x);
        if (need_b) {
          // silu''(x) = s (1 - s) (2 + x (1 - 2 s)) with s = sigmoid(x).
          const Tensor s = sigmoid(x);
          const Tensor d2 = mul(mul(s, rsub(s, 1)), add(mul(x, rsub(mul(s, 2), 1)), 2));
          gi[1] = mul(mul(g, ctx.input(0)), d2);
        }
        return;
      }
    }
  }

  BinaryKind kind_;
  bool inplace_;
  ScalarSide side_;
  Scalar alpha_;
  Scalar scalar_;
};

// True for the default alpha (integer 1), the case every op but a scaled add or sub takes.
bool is_unit_alpha(const Scalar& alpha) { return alpha.kind() == ScalarKind::Integral && alpha.to_int() == 1; }

// The op of two tensor operands with the default alpha: immutable and the same on every call, so
// one shared instance per kind and mode spares each eager call an allocation.
const OpPtr& plain_binary_op(BinaryKind kind, bool inplace) {
  static const auto table = [] {
    std::array<std::array<OpPtr, 2>, kBinaryKinds> t;
    for (int k = 0; k < kBinaryKinds; ++k)
      for (int i = 0; i < 2; ++i) t[k][i] = std::make_shared<const BinaryOp>(static_cast<BinaryKind>(k), i == 1, Scalar(1));
    return t;
  }();
  return table[static_cast<size_t>(kind)][inplace ? 1 : 0];
}

Tensor binary(BinaryKind kind, const Tensor& a, const Tensor& b, Scalar alpha = 1) {
  if (is_unit_alpha(alpha)) return dispatch1(plain_binary_op(kind, false), {a, b});
  return call_op<BinaryOp>({a, b}, kind, false, alpha);
}

Tensor binary_scalar(BinaryKind kind, const Tensor& a, Scalar s, ScalarSide side = ScalarSide::Right) {
  return call_op<BinaryOp>({a}, kind, false, Scalar(1), side, s);
}

Tensor& binary_(BinaryKind kind, Tensor& a, const Tensor& b, Scalar alpha = 1) {
  if (is_unit_alpha(alpha)) {
    dispatch(plain_binary_op(kind, true), {a, b});
  } else {
    call_op<BinaryOp>({a, b}, kind, true, alpha);
  }
  return a;
}

Tensor& binary_scalar_(BinaryKind kind, Tensor& a, Scalar s) {
  call_op<BinaryOp>({a}, kind, true, Scalar(1), ScalarSide::Right, s);
  return a;
}

}  // namespace

Tensor add(const Tensor& a, const Tensor& b, Scalar alpha) { return binary(BinaryKind::Add, a, b, alpha); }
Tensor add(const Tensor& a, Scalar b) { return binary_scalar(BinaryKind::Add, a, b); }
Tensor sub(const Tensor& a, const Tensor& b, Scalar alpha) { return binary(BinaryKind::Sub, a, b, alpha); }
Tensor sub(const Tensor& a, Scalar b) { return binary_scalar(BinaryKind::Sub, a, b); }
Tensor rsub(const Tensor& a, Scalar b) { return binary_scalar(BinaryKind::Sub, a, b, ScalarSide::Left); }
Tensor mul(const Tensor& a, const Tensor& b) { return binary(BinaryKind::Mul, a, b); }
Tensor mul(const Tensor& a, Scalar b) { return binary_scalar(BinaryKind::Mul, a, b); }
Tensor div(const Tensor& a, const Tensor& b) { return binary(BinaryKind::Div, a, b); }
Tensor div(const Tensor& a, Scalar b) { return binary_scalar(BinaryKind::Div, a, b); }
Tensor rdiv(const Tensor& a, Scalar b) { return binary_scalar(BinaryKind::Div, a, b, ScalarSide::Left); }
Tensor maximum(const Tensor& a, const Tensor& b) { return binary(BinaryKind::Maximum, a, b); }
Tensor minimum(const Tensor& a, const Tensor& b) { return binary(BinaryKind::Minimum, a, b); }
// pow is on PyTorch's CUDA autocast float32 list (every overload), not the CPU's.
Tensor pow(const Tensor& base, const Tensor& exponent) {
  return binary(BinaryKind::Pow, autocast::to_float(base, autocast::kCudaList),
                autocast::to_float(exponent, autocast::kCudaList));
}
Tensor pow(Scalar base, const Tensor& exponent) {
  return binary_scalar(BinaryKind::Pow, autocast::to_float(exponent, autocast::kCudaList), base, ScalarSide::Left);
}

Tensor tanh_backward(const Tensor& g, const Tensor& y) { return binary(BinaryKind::TanhBackward, g, y); }
Tensor sigmoid_backward(const Tensor& g, const Tensor& y) { return binary(BinaryKind::SigmoidBackward, g, y); }
Tensor threshold_backward(const Tensor& g, const Tensor& y) { return binary(BinaryKind::ThresholdBackward, g, y); }
Tensor gelu_second_derivative(const Tensor& x, bool tanh_approx) {
  const Tensor x2 = mul(x, x);
  if (!tanh_approx) {
    const Tensor pdf = mul(exp(mul(x2, -0.5)), ew::kInvSqrt2Pi);
    return mul(pdf, rsub(x2, 2));  // phi(x) * (2 - x^2)
  }
  // u = k (x + c x^3), t = tanh(u): gelu'' = (1 - t^2) (u' - x t u'^2 + x u'' / 2).
  const Tensor u = mul(add(x, mul(mul(x2, x), ew::kGeluCoeff)), ew::kSqrt2OverPi);
  const Tensor t = tanh(u);
  const Tensor du = mul(add(mul(x2, 3 * ew::kGeluCoeff), 1), ew::kSqrt2OverPi);
  const Tensor d2u = mul(x, 6 * ew::kGeluCoeff * ew::kSqrt2OverPi);
  const Tensor bracket = add(sub(du, mul(mul(mul(x, t), du), du)), mul(mul(x, d2u), 0.5));
  return mul(rsub(mul(t, t), 1), bracket);
}

Tensor silu_backward(const Tensor& g, const Tensor& x) { return binary(BinaryKind::SiluBackward, g, x); }

Tensor gelu_backward(const Tensor& g, const Tensor& x, bool tanh_approx) {
  return binary(tanh_approx ? BinaryKind::GeluTanhBackward : BinaryKind::GeluBackward, g, x);
}

// ---- Tensor methods -----------------------------------------------------------------------------

Tensor Tensor::add(const Tensor& other, Scalar alpha) const { return tg::add(*this, other, alpha); }
Tensor Tensor::add(Scalar other) const { return tg::add(*this, other); }
Tensor Tensor::sub(const Tensor& other, Scalar alpha) const { return tg::sub(*this, other, alpha); }
Tensor Tensor::sub(Scalar other) const { return tg::sub(*this, other); }
Tensor Tensor::mul(const Tensor& other) const { return tg::mul(*this, other); }
Tensor Tensor::mul(Scalar other) const { return tg::mul(*this, other); }
Tensor Tensor::div(const Tensor& other) const { return tg::div(*this, other); }
Tensor Tensor::div(Scalar other) const { return tg::div(*this, other); }
Tensor Tensor::maximum(const Tensor& other) const { return tg::maximum(*this, other); }
Tensor Tensor::minimum(const Tensor& other) const { return tg::minimum(*this, other); }

Tensor& Tensor::add_(const Tensor& other, Scalar alpha) { return binary_(BinaryKind::Add, *this, other, alpha); }
Tensor& Tensor::add_(Scalar other) { return binary_scalar_(BinaryKind::Add, *this, other); }
Tensor& Tensor::sub_(const Tensor& other, Scalar alpha) { return binary_(BinaryKind::Sub, *this, other, alpha); }
Tensor& Tensor::sub_(Scalar other) { return binary_scalar_(BinaryKind::Sub, *this, other); }
Tensor& Tensor::mul_(const Tensor& other) { return binary_(BinaryKind::Mul, *this, other); }
Tensor& Tensor::mul_(Scalar other) { return binary_scalar_(BinaryKind::Mul, *this, other); }
Tensor& Tensor::div_(const Tensor& other) { return binary_(BinaryKind::Div, *this, other); }
Tensor& Tensor::div_(Scalar other) { return binary_scalar_(BinaryKind::Div, *this, other); }

// ---- operators ----------------------------------------------------------------------------------

Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
Tensor operator+(const Tensor& a, Scalar b) { return add(a, b); }
Tensor operator-(const Tensor& a, Scalar b) { return sub(a, b); }
Tensor operator*(const Tensor& a, Scalar b) { return mul(a, b); }
Tensor operator/(const Tensor& a, Scalar b) { return div(a, b); }
Tensor operator+(Scalar a, const Tensor& b) { return add(b, a); }
Tensor operator-(Scalar a, const Tensor& b) { return rsub(b, a); }
Tensor operator*(Scalar a, const Tensor& b) { return mul(b, a); }
Tensor operator/(Scalar a, const Tensor& b) { return rdiv(b, a); }
Tensor operator-(const Tensor& a) { return neg(a); }
Tensor& operator+=(Tensor& a, const Tensor& b) { return a.add_(b); }
Tensor& operator-=(Tensor& a, const Tensor& b) { return a.sub_(b); }
Tensor& operator*=(Tensor& a, const Tensor& b) { return a.mul_(b); }
Tensor& operator/=(Tensor& a, const Tensor& b) { return a.div_(b); }
Tensor& operator+=(Tensor& a, Scalar b) { return a.add_(b); }
Tensor& operator-=(Tensor& a, Scalar b) { return a.sub_(b); }
Tensor& operator*=(Tensor& a, Scalar b) { return a.mul_(b); }
Tensor& operator/=(Tensor& a, Scalar b) { return a.div_(b); }

}  // namespace tg
