// Gradient clipping by the total norm. For orders 1, 2 and inf with every gradient on one device,
// multi_tensor_norm gives all the per-tensor norms in one op, and the total is their norm. Otherwise
// each gradient costs one partial reduction (in float32, or float64 for float64 gradients): sum |g|^p for a finite p != 0 (no root yet), max or min |g| for
// +-inf, the count of nonzeros for 0. The partials meet in one buffer on the first gradient's
// device, and one reduction there gives the total (the root taken once). The clip coefficient
// min(1, max_norm / (total + 1e-6)) is a device tensor that every gradient is multiplied by (no
// host branch on it), so the whole computation captures in a CUDA graph and traces in compile().
#include "nn/utils/clip_grad.h"

#include <cmath>
#include <cstdio>
#include <string>

#include "ops/elementwise/binary.h"
#include "ops/elementwise/compare.h"
#include "ops/elementwise/unary.h"
#include "ops/factory/factory.h"
#include "ops/reduce/multi_tensor_norm.h"
#include "ops/reduce/reduce.h"
#include "ops/shape/join.h"
#include "tensor/check.h"
#include "tensor/grad_mode.h"

namespace tg::nn::utils {
namespace {

// The dtype partial norms of `t` accumulate in.
DType accumulate_dtype(DType t) { return t == kFloat64 ? kFloat64 : kFloat32; }

// Python's repr of the norm's order, for the error message.
std::string order_str(double p) {
  if (std::isinf(p)) return p > 0 ? "inf" : "-inf";
  char buf[32];
  std::snprintf(buf, sizeof buf, p == std::floor(p) && std::abs(p) < 1e15 ? "%.1f" : "%.17g", p);
  return buf;
}

// One tensor's contribution to the total norm (see the file comment).
Tensor partial_norm(const Tensor& g, double p, DType acc) {
  const Tensor x = g.dtype() == acc ? g : g.to(acc);
  if (std::isinf(p)) {
    TG_CHECK(x.numel() > 0, "[clip_grad_norm_] linalg.vector_norm cannot compute the ", order_str(p),
             " norm on an empty tensor because the operation does not have an identity");
    return p > 0 ? amax(abs(x)) : amin(abs(x));
  }
  if (p == 0.0) return sum(ne(x, 0.0), {}, false, acc);
  if (p == 2.0) return sum(mul(x, x));
  if (p == 1.0) return sum(abs(x));
  return sum(pow(abs(x), p));
}

TensorList defined_grads(const TensorList& parameters) {
  TensorList grads;
  for (const Tensor& p : parameters) {
    TG_CHECK(p.defined(), "[clip_grad_norm_] a parameter is an undefined tensor");
    if (p.grad().defined()) grads.push_back(p.grad());
  }
  return grads;
}

// The total norm in its accumulation dtype (the promoted dtype of the partials).
Tensor total_norm_accumulated(const TensorList& tensors, double p, DType& result_dtype) {
  const Device first_device = tensors[0].device();
  DType acc = accumulate_dtype(tensors[0].dtype());
  result_dtype = tensors[0].dtype();
  for (const Tensor& t : tensors) {
    TG_CHECK(t.is_floating_point(), "[clip_grad_norm_] expected floating-point gradients, got ",
             dtype_name(t.dtype()));
    acc = promote_types(acc, accumulate_dtype(t.dtype()));
    result_dtype = promote_types(result_dtype, t.dtype());
  }
  bool one_device = true;
  for (const Tensor& t : tensors) one_device = one_device && t.device() == first_device;
  if (one_device && (p == 1.0 || p == 2.0 || p == INFINITY)) {
    // One op for every tensor's norm (one launch per dtype on CUDA), then the norm of the norms, as
    // PyTorch's foreach path computes it.
    for (const Tensor& t : tensors)
      TG_CHECK(p != INFINITY || t.numel() > 0, "[clip_grad_norm_] linalg.vector_norm cannot compute the inf norm on "
               "an empty tensor because the operation does not have an identity");
    const Tensor norms = multi_tensor_norm(tensors, p);
    if (p == INFINITY) return amax(norms);
    return p == 1.0 ? sum(norms) : sqrt(sum(mul(norms, norms)));
  }
  TensorList partials;
  partials.reserve(tensors.size());
  for (const Tensor& t : tensors) partials.push_back(partial_norm(t, p, acc).to(first_device, acc));
  const Tensor all = stack(partials);
  if (std::isinf(p)) return p > 0 ? amax(all) : amin(all);
  // The order-0 "norm" of the per-tensor counts, as vector_norm(stack(norms), 0) counts them.
  if (p == 0.0) return sum(ne(all, 0.0), {}, false, acc);
  const Tensor total = sum(all);
  if (p == 1.0) return total;
  if (p == 2.0) return sqrt(total);
  return pow(total, 1.0 / p);
}

void check_finite(const Tensor& total, double p) {
  const double v = total.to(kCPU, kFloat64).item<double>();
  TG_CHECK(std::isfinite(v), "[clip_grad_norm_] The total norm of order ", order_str(p),
           " for gradients from `parameters` is non-finite, so it cannot be clipped. To disable this error and "
           "scale the gradients by the non-finite norm anyway, set `error_if_nonfinite=False`");
}

// Multiplies every tensor by `coef` (a 0-dim tensor), cast once per device and dtype.
void scale_by_coef_(const TensorList& tensors, const Tensor& coef) {
  std::vector<Tensor> casts;
  for (const Tensor& t : tensors) {
    if (!t.defined()) continue;
    Tensor* c = nullptr;
    for (Tensor& k : casts)
      if (k.device() == t.device() && k.dtype() == t.dtype()) c = &k;
    if (!c) c = &casts.emplace_back(coef.to(t.device(), t.dtype()));
    Tensor g = t;
    g.mul_(*c);
  }
}

// Multiplies every tensor by min(1, max_norm / (total + 1e-6)).
void scale_by_clip_coef_(const TensorList& tensors, double max_norm, const Tensor& total) {
  scale_by_coef_(tensors, clamp(rdiv(add(total, 1e-6), max_norm), std::nullopt, 1.0));
}

// The same with max_norm a 0-dim tensor, read when the ops run (so a traced or captured clip follows
// a changing threshold); it is cast to the total's device and dtype first, so that the coefficient is
// computed as with a number.
void scale_by_clip_coef_(const TensorList& tensors, const Tensor& max_norm, const Tensor& total) {
  const Tensor limit = max_norm.reshape({}).to(total.device(), total.dtype());
  scale_by_coef_(tensors, clamp(div(limit, add(total, 1e-6)), std::nullopt, 1.0));
}

void check_max_norm(const char* op, const Tensor& max_norm) {
  TG_CHECK(max_norm.defined() && max_norm.numel() == 1 && max_norm.is_floating_point(), "[", op,
           "] max_norm must be one floating-point number, got ",
           max_norm.defined() ? std::string(dtype_name(max_norm.dtype())) + " of shape " + shape_str(max_norm.sizes())
                              : std::string("an undefined tensor"));
}

template <typename MaxNorm>
Tensor total_and_clip(const TensorList& grads, const MaxNorm& max_norm, double p, bool error_if_nonfinite) {
  NoGradGuard no_grad;
  if (grads.empty()) return zeros({});
  DType result_dtype;
  const Tensor total = total_norm_accumulated(grads, p, result_dtype);
  if (error_if_nonfinite) check_finite(total, p);
  scale_by_clip_coef_(grads, max_norm, total);
  return total.dtype() == result_dtype ? total : total.to(result_dtype);
}

// clip_grads_with_norm_ for either kind of max_norm.
template <typename MaxNorm>
void clip_with_total(const TensorList& parameters, const MaxNorm& max_norm, const Tensor& total_norm) {
  const TensorList grads = defined_grads(parameters);
  if (grads.empty()) return;
  TG_CHECK(total_norm.defined() && total_norm.numel() == 1, "[clip_grads_with_norm_] total_norm must be one number, got ",
           total_norm.defined() ? "shape " + shape_str(total_norm.sizes()) : std::string("an undefined tensor"));
  NoGradGuard no_grad;
  scale_by_clip_coef_(grads, max_norm, total_norm.reshape({}));
}

}  // namespace

Tensor get_total_norm(const TensorList& tensors, double norm_type, bool error_if_nonfinite, std::optional<bool>) {
  NoGradGuard no_grad;
  TensorList defined;
  for (const Tensor& t : tensors)
    if (t.defined()) defined.push_back(t);
  if (defined.empty()) return zeros({});
  DType result_dtype;
  const Tensor total = total_norm_accumulated(defined, norm_type, result_dtype);
  if (error_if_nonfinite) check_finite(total, norm_type);
  return total.dtype() == result_dtype ? total : total.to(result_dtype);
}

void clip_grads_with_norm_(const TensorList& parameters, double max_norm, const Tensor& total_norm,
                           std::optional<bool>) {
  clip_with_total(parameters, max_norm, total_norm);
}

Tensor clip_grad_norm_(const TensorList& parameters, double max_norm, double norm_type, bool error_if_nonfinite,
                       std::optional<bool>) {
  return total_and_clip(defined_grads(parameters), max_norm, norm_type, error_if_nonfinite);
}

Tensor clip_grad_norm_(const TensorList& parameters, const Tensor& max_norm, double norm_type,
                       bool error_if_nonfinite, std::optional<bool>) {
  check_max_norm("clip_grad_norm_", max_norm);
  return total_and_clip(defined_grads(parameters), max_norm, norm_type, error_if_nonfinite);
}

void clip_grads_with_norm_(const TensorList& parameters, const Tensor& max_norm, const Tensor& total_norm,
                           std::optional<bool>) {
  check_max_norm("clip_grads_with_norm_", max_norm);
  clip_with_total(parameters, max_norm, total_norm);
}

namespace {
TensorList defined_only(const TensorList& grads) {
  TensorList defined;
  for (const Tensor& g : grads)
    if (g.defined()) defined.push_back(g);
  return defined;
}
}  // namespace

Tensor clip_norm_(const TensorList& grads, double max_norm, double norm_type, bool error_if_nonfinite) {
  return total_and_clip(defined_only(grads), max_norm, norm_type, error_if_nonfinite);
}

Tensor clip_norm_(const TensorList& grads, const Tensor& max_norm, double norm_type, bool error_if_nonfinite) {
  check_max_norm("clip_norm_", max_norm);
  return total_and_clip(defined_only(grads), max_norm, norm_type, error_if_nonfinite);
}

}  // namespace tg::nn::utils
