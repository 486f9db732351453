// batch_norm composed from tg reductions (CUB on CUDA) and elementwise ops, except training-mode
// batch_norm on floating inputs, which is one op (ops/norm/batch_norm.cpp); layer_norm and group_norm
// check their arguments here and run as one fused op each way (ops/norm/row_norm.h). The running-
// statistics update is copy_ into the buffers (a declared mutation, functionalized by the tracer).
#include "ops/norm/norm.h"

#include "ops/core/autocast.h"
#include "ops/core/dispatch.h"
#include "ops/elementwise/binary.h"
#include "ops/elementwise/copy.h"
#include "ops/elementwise/unary.h"
#include "ops/factory/factory.h"
#include "ops/norm/batch_norm.h"
#include "ops/norm/row_norm.h"
#include "ops/reduce/reduce.h"
#include "ops/shape/view.h"
#include "tensor/grad_mode.h"

namespace tg {
namespace {

// Checks that an optional per-channel/affine tensor has `sizes`.
void check_param(const char* op, const char* what, const Tensor& t, const Shape& sizes, const Tensor& input) {
  if (!t.defined()) return;
  TG_CHECK(t.sizes() == sizes, "[", op, "] ", what, " of shape ", shape_str(t.sizes()), " does not match ",
           shape_str(sizes), " expected for input of shape ", shape_str(input.sizes()));
  TG_CHECK(t.dtype() == input.dtype(), "[", op, "] ", what, " has dtype ", dtype_name(t.dtype()),
           " but input has ", dtype_name(input.dtype()));
}

// Checks an optional affine parameter of layer_norm / group_norm: `sizes`, and the input's dtype
// or float32 beside a 16-bit input (a mixed-precision model's norms, as PyTorch allows).
void check_affine(const char* op, const char* what, const Tensor& t, const Shape& sizes, const Tensor& input) {
  if (!t.defined()) return;
  TG_CHECK(t.sizes() == sizes, "[", op, "] ", what, " of shape ", shape_str(t.sizes()), " does not match ",
           shape_str(sizes), " expected for input of shape ", shape_str(input.sizes()));
  TG_CHECK(t.dtype() == input.dtype() || (is_low_precision(input.dtype()) && t.dtype() == kFloat32), "[", op, "] ",
           what, " has dtype ", dtype_name(t.dtype()), " but input has ", dtype_name(input.dtype()));
}

// Applies optional weight and bias, viewed with `view_sizes` so they broadcast against y.
Tensor affine(Tensor y, const Tensor& weight, const Tensor& bias, const Shape& view_sizes) {
  if (weight.defined()) y = mul(y, weight.view(view_sizes));
  if (bias.defined()) y = add(y, bias.view(view_sizes));
  return y;
}

}  // namespace

Tensor batch_norm(const Tensor& input, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight,
                  const Tensor& bias, bool training, double momentum, double eps) {
  const char* op = "batch_norm";
  // batch_norm is on no autocast list: its pieces (rsqrt, sums) keep the input's dtype.
  AutocastOffGuard no_autocast;
  TG_CHECK(input.defined(), "[batch_norm] got an undefined input");
  TG_CHECK(input.dim() >= 2, "[batch_norm] input of shape ", shape_str(input.sizes()),
           " has the wrong rank: expected [N, C, *] with at least 2 dims");
  check_floating(op, input);
  // A 16-bit input with float32 parameters or statistics (a mixed-precision model) normalizes in
  // float32, as PyTorch's kernels do, and returns the input's dtype.
  const Tensor* params[] = {&weight, &bias, &running_mean, &running_var};
  for (const Tensor* p : params)
    if (is_low_precision(input.dtype()) && p->defined() && p->dtype() == kFloat32)
      return to(batch_norm(to(input, input.device(), kFloat32), running_mean, running_var, weight, bias, training,
                           momentum, eps),
                input.device(), input.dtype());
  const int64_t C = input.sizes()[1];
  const Shape ch{C};
  check_param(op, "weight", weight, ch, input);
  check_param(op, "bias", bias, ch, input);
  check_param(op, "running_mean", running_mean, ch, input);
  check_param(op, "running_var", running_var, ch, input);
  TG_CHECK(running_mean.defined() == running_var.defined(),
           "[batch_norm] running_mean and running_var must both be given or both be undefined");
  Shape view_sizes(input.dim(), 1);
  view_sizes[1] = C;
  if (!training) {
    TG_CHECK(running_mean.defined(), "[batch_norm] eval mode needs running_mean and running_var");
    const Tensor scale = rsqrt(add(running_var, eps)).view(view_sizes);
    return affine(mul(sub(input, running_mean.view(view_sizes)), scale), weight, bias, view_sizes);
  }
  Shape dims{0};
  for (int64_t d = 2; d < input.dim(); ++d) dims.push_back(d);
  const int64_t n = input.numel() / (C == 0 ? 1 : C);
  TG_CHECK(n > 1, "[batch_norm] expected more than 1 value per channel when training, got input of shape ",
           shape_str(input.sizes()));
  if (is_floating(input.dtype())) {
    // One op and one backward op instead of the composition below.
    const BatchNormTrainingResult r =
        batch_norm_training(input, weight.defined() ? weight : ones(ch, input.options()),
                            bias.defined() ? bias : zeros(ch, input.options()), running_mean, running_var, momentum, eps);
    if (running_mean.defined()) {
      NoGradGuard no_grad;
      Tensor rm = running_mean, rv = running_var;
      copy_(rm, r.running_mean);
      copy_(rv, r.running_var);
    }
    return r.output;
  }
  const Tensor mu = mean(input, dims, true);
  const Tensor centered = sub(input, mu);
  const Tensor v = mean(mul(centered, centered), dims, true);
  if (running_mean.defined()) {
    NoGradGuard no_grad;
    Tensor rm = running_mean, rv = running_var;
    const Tensor batch_mean = mu.detach().view(ch);
    const Tensor unbiased = mul(v.detach().view(ch), static_cast<double>(n) / static_cast<double>(n - 1));
    copy_(rm, add(mul(rm, 1.0 - momentum), mul(batch_mean, momentum)));
    copy_(rv, add(mul(rv, 1.0 - momentum), mul(unbiased, momentum)));
  }
  return affine(mul(centered, rsqrt(add(v, eps))), weight, bias, view_sizes);
}

Tensor layer_norm(const Tensor& input_in, const Shape& normalized_shape, const Tensor& weight_in, const Tensor& bias_in,
                  double eps) {
  // CUDA's autocast float32 list holds layer_norm; the CPU's does not (16-bit in, 16-bit out there).
  const Tensor input = autocast::to_float(input_in, autocast::kCudaList);
  const Tensor weight = autocast::to_float(weight_in, autocast::kCudaList);
  const Tensor bias = autocast::to_float(bias_in, autocast::kCudaList);
  const char* op = "layer_norm";
  TG_CHECK(input.defined(), "[layer_norm] got an undefined input");
  check_floating(op, input);
  const int64_t k = static_cast<int64_t>(normalized_shape.size());
  bool ok = k >= 1 && k <= input.dim();
  for (int64_t i = 0; ok && i < k; ++i) ok = input.sizes()[input.dim() - k + i] == normalized_shape[i];
  TG_CHECK(ok, "[layer_norm] normalized_shape ", shape_str(normalized_shape), " does not match the trailing dims of input ",
           shape_str(input.sizes()), ": expected input of shape [*, ", shape_str(normalized_shape).substr(1));
  check_affine(op, "weight", weight, normalized_shape, input);
  check_affine(op, "bias", bias, normalized_shape, input);
  RowNormGeometry g;
  g.channels = 1;
  for (int64_t d = input.dim() - k; d < input.dim(); ++d) g.channels *= input.sizes()[d];
  g.outer = g.channels == 0 ? 0 : input.numel() / g.channels;
  g.eps = eps;
  return row_norm(op, input, weight, bias, g).output;
}

Tensor group_norm(const Tensor& input_in, int64_t num_groups, const Tensor& weight_in, const Tensor& bias_in, double eps) {
  const Tensor input = autocast::to_float(input_in, autocast::kCudaList);
  const Tensor weight = autocast::to_float(weight_in, autocast::kCudaList);
  const Tensor bias = autocast::to_float(bias_in, autocast::kCudaList);
  const char* op = "group_norm";
  TG_CHECK(input.defined(), "[group_norm] got an undefined input");
  TG_CHECK(input.dim() >= 2, "[group_norm] input of shape ", shape_str(input.sizes()),
           " has the wrong rank: expected [N, C, *] with at least 2 dims");
  check_floating(op, input);
  const int64_t N = input.sizes()[0], C = input.sizes()[1];
  TG_CHECK(num_groups > 0 && C % num_groups == 0, "[group_norm] num_groups ", num_groups,
           " must be positive and divide the number of channels ", C, " of input ", shape_str(input.sizes()));
  check_affine(op, "weight", weight, Shape{C}, input);
  check_affine(op, "bias", bias, Shape{C}, input);
  RowNormGeometry g;
  g.outer = N;
  g.groups = num_groups;
  g.channels = C / num_groups;
  g.inner = 1;
  for (int64_t d = 2; d < input.dim(); ++d) g.inner *= input.sizes()[d];
  g.eps = eps;
  return row_norm(op, input, weight, bias, g).output;
}

}  // namespace tg
