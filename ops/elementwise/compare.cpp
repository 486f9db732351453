// Comparisons (eq, ne, lt, le, gt, ge: bool results, no gradient), where(), and the host-side
// checks allclose() and equal().
#include "ops/elementwise/compare.h"

#include <cmath>
#include <iterator>
#include <utility>

#include "ops/core/dispatch.h"
#include "ops/elementwise/cpu/elementwise.h"
#include "ops/elementwise/elementwise.h"
#include "ops/elementwise/pointwise.h"
#include "ops/factory/factory.h"

#ifdef TG_WITH_CUDA
#include "ops/elementwise/cuda/elementwise.h"
#endif

namespace tg {
namespace {

constexpr uint32_t kCmp = kElementwise | kNonDifferentiable;
#define TG_COMPARE_SCHEMA(K, NAME, FN) OpSchema{NAME, kCmp},
const OpSchema kSchemas[] = {TG_COMPARE_KINDS(TG_COMPARE_SCHEMA)};
#undef TG_COMPARE_SCHEMA
static_assert(std::size(kSchemas) == kCompareKinds, "one schema per CompareKind");

// a <op> b with a and b promoted to their common dtype; b may be a host scalar.
class CompareOp final : public Op {
 public:
  explicit CompareOp(CompareKind kind) : kind_(kind) {}
  CompareOp(CompareKind kind, Scalar other) : kind_(kind), scalar_(other), has_scalar_(true) {}

  const OpSchema& schema() const override { return kSchemas[static_cast<int>(kind_)]; }

  std::vector<TensorMeta> infer(const TensorList& in) const override {
    const char* op = schema().name.data();
    if (has_scalar_) return single_output(elementwise_meta(op, {&in[0]}, kBool));
    return single_output(elementwise_meta(op, {&in[0], &in[1]}, kBool));
  }

  void eval(const TensorList& in, TensorList& out) const override {
    const Tensor& o = out[0];
    EwParams p;
    if (has_scalar_) {
      p.side = ScalarSide::Right;
      p.scalar = scalar_;
      run(result_type(in[0], scalar_), p, TensorIter::make(o, {&in[0]}), o);
      return;
    }
    const Tensor& a = in[0];
    const Tensor& b = in[1];
    const DType compute = result_type({&a, &b});
    if (is_host_scalar_operand(b, o)) {
      p.side = ScalarSide::Right;
      p.scalar = scalar_of(b);
      run(compute, p, TensorIter::make(o, {&a}), o);
    } else if (is_host_scalar_operand(a, o)) {
      p.side = ScalarSide::Left;
      p.scalar = scalar_of(a);
      run(compute, p, TensorIter::make(o, {&b}), o);
    } else {
      run(compute, p, TensorIter::make(o, {&a, &b}), o);
    }
  }

  bool pointwise(const std::vector<TensorMeta>& in, PointwiseMath& math) const override {
    math.family = PointwiseFamily::Compare;
    math.compare = kind_;
    if (has_scalar_) {
      math.compute = promote_with_scalar(in[0].dtype, scalar_.kind());
      math.params.side = ScalarSide::Right;
      math.params.scalar = scalar_;
    } else {
      math.compute = result_type(in);
    }
    return true;
  }

  TensorList backward(const BackwardContext&, const TensorList&) const override {
    return TensorList(has_scalar_ ? 1 : 2);
  }

  SaveSpec saves() const override { return {.inputs = false}; }

  std::string attrs() const override { return has_scalar_ ? "other=" + scalar_str(scalar_) : std::string(); }

 private:
  void run(DType compute, EwParams p, TensorIter it, const Tensor& out) const {
    const CompareKind kind = mirrored(kind_);
    if (kind != kind_) swap_operands(p, it);
#ifdef TG_WITH_CUDA
    if (out.is_cuda()) {
      cuda::launch_compare(kind, compute, p, it);
      return;
    }
#else
    (void)out;
#endif
    cpu::launch_compare(kind, compute, p, it);
  }

  // Swaps the two compared operands: the host value's side, or the iteration's two inputs.
  static void swap_operands(EwParams& p, TensorIter& it) {
    if (p.side != ScalarSide::None) {
      p.side = p.side == ScalarSide::Right ? ScalarSide::Left : ScalarSide::Right;
      return;
    }
    std::swap(it.data[1], it.data[2]);
    std::swap(it.dtypes[1], it.dtypes[2]);
    std::swap(it.strides[1], it.strides[2]);
  }

  CompareKind kind_;
  Scalar scalar_;
  bool has_scalar_ = false;
};

const OpSchema kWhereSchema{"where", kElementwise};

// cond ? a : b, broadcast over all three; the gradient goes to the branch each element took.
class WhereOp final : public Op {
 public:
  const OpSchema& schema() const override { return kWhereSchema; }

  std::vector<TensorMeta> infer(const TensorList& in) const override {
    TG_CHECK(in[0].dtype() == kBool, "[where] expected condition to be a boolean tensor, but got a tensor with dtype ",
             dtype_name(in[0].dtype()));
    return single_output(elementwise_meta("where", {&in[0], &in[1], &in[2]}, result_type({&in[1], &in[2]})));
  }

  void eval(const TensorList& in, TensorList& out) const override {
    const Tensor& o = out[0];
    const DType compute = result_type({&in[1], &in[2]});
#ifdef TG_WITH_CUDA
    if (o.is_cuda()) {
      // Host scalars are staged: where() with a CPU 0-dim operand is rare enough to pay a copy.
      TensorList dev(3);
      for (size_t i = 0; i < 3; ++i) dev[i] = is_host_scalar_operand(in[i], o) ? in[i].to(o.device()) : in[i];
      cuda::launch_where(compute, TensorIter::make(o, {&dev[0], &dev[1], &dev[2]}));
      return;
    }
#endif
    cpu::launch_where(compute, TensorIter::make(o, {&in[0], &in[1], &in[2]}));
  }

  bool pointwise(const std::vector<TensorMeta>& in, PointwiseMath& math) const override {
    math.family = PointwiseFamily::Where;
    math.compute = result_type(std::vector<TensorMeta>{in[1], in[2]});
    return true;
  }

  TensorList backward(const BackwardContext& ctx, const TensorList& grads) const override {
    const Tensor& g = grads[0];
    const Tensor cond = ctx.input(0);
    const Tensor zero = zeros({}, {.dtype = g.dtype(), .device = g.device()});
    TensorList gi(3);
    if (ctx.needs_input_grad(1)) gi[1] = reduce_grad(where(cond, g, zero), ctx.input_meta(1));
    if (ctx.needs_input_grad(2)) gi[2] = reduce_grad(where(cond, zero, g), ctx.input_meta(2));
    return gi;
  }
};

Tensor compare(CompareKind kind, const Tensor& a, const Tensor& b) { return call_op<CompareOp>({a, b}, kind); }
Tensor compare(CompareKind kind, const Tensor& a, Scalar b) { return call_op<CompareOp>({a}, kind, b); }

}  // namespace

Tensor eq(const Tensor& a, const Tensor& b) { return compare(CompareKind::Eq, a, b); }
Tensor ne(const Tensor& a, const Tensor& b) { return compare(CompareKind::Ne, a, b); }
Tensor lt(const Tensor& a, const Tensor& b) { return compare(CompareKind::Lt, a, b); }
Tensor le(const Tensor& a, const Tensor& b) { return compare(CompareKind::Le, a, b); }
Tensor gt(const Tensor& a, const Tensor& b) { return compare(CompareKind::Gt, a, b); }
Tensor ge(const Tensor& a, const Tensor& b) { return compare(CompareKind::Ge, a, b); }
Tensor eq(const Tensor& a, Scalar b) { return compare(CompareKind::Eq, a, b); }
Tensor ne(const Tensor& a, Scalar b) { return compare(CompareKind::Ne, a, b); }
Tensor lt(const Tensor& a, Scalar b) { return compare(CompareKind::Lt, a, b); }
Tensor le(const Tensor& a, Scalar b) { return compare(CompareKind::Le, a, b); }
Tensor gt(const Tensor& a, Scalar b) { return compare(CompareKind::Gt, a, b); }
Tensor ge(const Tensor& a, Scalar b) { return compare(CompareKind::Ge, a, b); }

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) { return call_op<WhereOp>({cond, a, b}); }

bool allclose(const Tensor& a, const Tensor& b, double rtol, double atol, bool equal_nan) {
  if (a.sizes() != b.sizes()) return false;
  const std::vector<double> av = a.to_vector<double>();
  const std::vector<double> bv = b.to_vector<double>();
  for (size_t i = 0; i < av.size(); ++i) {
    const double x = av[i];
    const double y = bv[i];
    if (std::isnan(x) || std::isnan(y)) {
      if (equal_nan && std::isnan(x) && std::isnan(y)) continue;
      return false;
    }
    if (x == y) continue;  // equal infinities
    if (std::isinf(x) || std::isinf(y) || std::abs(x - y) > atol + rtol * std::abs(y)) return false;
  }
  return true;
}

bool equal(const Tensor& a, const Tensor& b) {
  if (a.sizes() != b.sizes()) return false;
  if (a.numel() == 0) return true;
  const std::vector<bool> same = eq(a, b).to_vector<bool>();
  for (bool s : same)
    if (!s) return false;
  return true;
}

Tensor Tensor::eq(const Tensor& other) const { return tg::eq(*this, other); }
Tensor Tensor::eq(Scalar other) const { return tg::eq(*this, other); }
Tensor Tensor::ne(const Tensor& other) const { return tg::ne(*this, other); }
Tensor Tensor::ne(Scalar other) const { return tg::ne(*this, other); }
Tensor Tensor::lt(const Tensor& other) const { return tg::lt(*this, other); }
Tensor Tensor::lt(Scalar other) const { return tg::lt(*this, other); }
Tensor Tensor::le(const Tensor& other) const { return tg::le(*this, other); }
Tensor Tensor::le(Scalar other) const { return tg::le(*this, other); }
Tensor Tensor::gt(const Tensor& other) const { return tg::gt(*this, other); }
Tensor Tensor::gt(Scalar other) const { return tg::gt(*this, other); }
Tensor Tensor::ge(const Tensor& other) const { return tg::ge(*this, other); }
Tensor Tensor::ge(Scalar other) const { return tg::ge(*this, other); }

}  // namespace tg
