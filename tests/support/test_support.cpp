#include "test_support.h"

#include <cmath>

namespace tg::testing {
namespace {

// sum(fn(inputs) * weights) in float64, the scalar whose gradient the checks compare.
double projected(const TensorFn& fn, const TensorList& inputs, const Tensor& weights) {
  NoGradGuard no_grad;
  Tensor out = fn(inputs);
  return (out.to(kFloat64) * weights).sum().item<double>();
}

void check_against_numeric(const TensorFn& fn, const TensorList& inputs, double eps, double atol, double rtol,
                           const char* what) {
  Tensor probe;
  {
    NoGradGuard no_grad;
    probe = fn(inputs);
  }
  Tensor weights = random_tensor(probe.sizes(), kFloat64, false, 0.5, 1.5);
  Tensor out = fn(inputs);
  ASSERT_TRUE(out.requires_grad()) << what << ": output does not require grad";
  TensorList wrt;
  for (const Tensor& t : inputs)
    if (t.defined() && t.requires_grad()) wrt.push_back(t);
  TensorList analytic = grad({(out.to(kFloat64) * weights).sum()}, wrt, {}, false, false, true);
  size_t k = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& x = inputs[i];
    if (!x.defined() || !x.requires_grad()) continue;
    ASSERT_EQ(x.dtype(), kFloat64) << what << ": gradcheck inputs must be float64";
    ASSERT_TRUE(x.is_cpu() && x.is_contiguous()) << what << ": gradcheck inputs must be contiguous CPU tensors";
    Tensor a = analytic[k++];
    std::vector<double> av = a.defined() ? a.to_vector<double>() : std::vector<double>(x.numel(), 0.0);
    double* p = x.data_ptr<double>();
    for (int64_t j = 0; j < x.numel(); ++j) {
      const double saved = p[j];
      p[j] = saved + eps;
      const double up = projected(fn, inputs, weights);
      p[j] = saved - eps;
      const double down = projected(fn, inputs, weights);
      p[j] = saved;
      const double numeric = (up - down) / (2 * eps);
      EXPECT_NEAR(av[j], numeric, atol + rtol * std::abs(numeric))
          << what << ": input " << i << ", element " << j << " (analytical vs numerical)";
    }
  }
}

}  // namespace

void expect_gradcheck(const TensorFn& fn, const TensorList& inputs, double eps, double atol, double rtol) {
  check_against_numeric(fn, inputs, eps, atol, rtol, "gradcheck");
}

void expect_gradgradcheck(const TensorFn& fn, const TensorList& inputs, double eps, double atol, double rtol) {
  // The first derivative (projected with fixed weights) is itself checked against finite differences.
  Tensor probe;
  {
    NoGradGuard no_grad;
    probe = fn(inputs);
  }
  Tensor weights = random_tensor(probe.sizes(), kFloat64, false, 0.5, 1.5);
  TensorFn first = [&](const TensorList& xs) {
    TensorList wrt;
    for (const Tensor& t : xs)
      if (t.defined() && t.requires_grad()) wrt.push_back(t);
    GradModeGuard enable(true);
    TensorList g = grad({(fn(xs) * weights).sum()}, wrt, {}, true, true, true);
    Tensor total;
    for (const Tensor& gi : g) {
      if (!gi.defined()) continue;
      Tensor s = (gi * gi).sum();
      total = total.defined() ? total + s : s;
    }
    return total;
  };
  check_against_numeric(first, inputs, eps, atol, rtol, "gradgradcheck");
}

void expect_cuda_matches_cpu(const TensorFn& fn, const TensorList& cpu_inputs, double rtol, double atol) {
  TensorList cuda_inputs;
  for (const Tensor& t : cpu_inputs) cuda_inputs.push_back(t.defined() ? t.cuda() : t);
  Tensor on_cpu = fn(cpu_inputs);
  Tensor on_cuda = fn(cuda_inputs);
  ASSERT_TRUE(on_cuda.is_cuda()) << "the CUDA run produced a tensor on " << on_cuda.device().str();
  EXPECT_EQ(on_cpu.dtype(), on_cuda.dtype());
  expect_close(on_cuda, on_cpu, rtol, atol);
}

void expect_close(const Tensor& a, const Tensor& b, double rtol, double atol) {
  ASSERT_EQ(a.sizes(), b.sizes()) << "sizes differ: " << shape_str(a.sizes()) << " vs " << shape_str(b.sizes());
  std::vector<double> av = a.to_vector<double>();
  std::vector<double> bv = b.to_vector<double>();
  for (size_t i = 0; i < av.size(); ++i) {
    if (std::isnan(av[i]) && std::isnan(bv[i])) continue;
    EXPECT_NEAR(av[i], bv[i], atol + rtol * std::abs(bv[i])) << "element " << i;
  }
}

TensorList loss_and_grads(nn::Module& model, const Tensor& loss) {
  model.zero_grad();
  loss.backward();
  TensorList out{loss.detach().clone()};
  for (const Tensor& p : model.parameters()) out.push_back(p.grad().clone());
  return out;
}

Tensor random_tensor(const Shape& sizes, DType dtype, bool requires_grad, double lo, double hi) {
  Tensor t = (rand(sizes, {.dtype = kFloat64}) * (hi - lo) + lo).to(dtype);
  if (requires_grad) t.requires_grad_(true);
  return t;
}

}  // namespace tg::testing
