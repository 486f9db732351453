#include "nn/init.h"

#include <cmath>

#include "ops/random/random_fill.h"
#include "tensor/grad_mode.h"

namespace tg::nn::init {
namespace {
thread_local bool t_skip_draws = false;
}  // namespace

SkipDrawsGuard::SkipDrawsGuard() : previous_(t_skip_draws) { t_skip_draws = true; }
SkipDrawsGuard::~SkipDrawsGuard() { t_skip_draws = previous_; }

bool skipping_draws() { return t_skip_draws; }

std::pair<int64_t, int64_t> fan_in_and_fan_out(const Tensor& weight) {
  TG_CHECK(weight.dim() >= 2, "[init] fan in and fan out need a tensor with at least 2 dims, got shape ",
           shape_str(weight.sizes()));
  int64_t receptive = 1;
  for (int64_t d = 2; d < weight.dim(); ++d) receptive *= weight.size(d);
  return {weight.size(1) * receptive, weight.size(0) * receptive};
}

Tensor& uniform_(Tensor& t, double low, double high) {
  TG_CHECK(low <= high, "[init] uniform_ expects low <= high, got low=", low, " high=", high);
  NoGradGuard no_grad;
  if (skipping_draws()) {
    skip_random_draws(t.numel(), t.dtype());
    return t;
  }
  // Drawn into t, then scaled and shifted there: the same values as a separate draw scaled, shifted
  // and copied into t, without the second tensor and the copy.
  fill_rand_(t).mul_(high - low).add_(low);
  return t;
}

Tensor& normal_(Tensor& t, double mean, double std) {
  TG_CHECK(std >= 0, "[init] normal_ expects std >= 0, got ", std);
  NoGradGuard no_grad;
  if (skipping_draws()) {
    skip_random_draws(t.numel(), t.dtype());
    return t;
  }
  fill_randn_(t).mul_(std).add_(mean);
  return t;
}

Tensor& zeros_(Tensor& t) {
  NoGradGuard no_grad;
  t.zero_();
  return t;
}

Tensor& kaiming_uniform_(Tensor& t, double a) {
  const auto [fan_in, fan_out] = fan_in_and_fan_out(t);
  TG_CHECK(fan_in > 0, "[init] kaiming_uniform_ on a tensor with zero fan in, shape ", shape_str(t.sizes()));
  const double gain = std::sqrt(2.0 / (1.0 + a * a));
  const double bound = gain * std::sqrt(3.0 / static_cast<double>(fan_in));
  return uniform_(t, -bound, bound);
}

Tensor& xavier_uniform_(Tensor& t, double gain) {
  const auto [fan_in, fan_out] = fan_in_and_fan_out(t);
  TG_CHECK(fan_in + fan_out > 0, "[init] xavier_uniform_ on a tensor with zero fans, shape ", shape_str(t.sizes()));
  const double bound = gain * std::sqrt(6.0 / static_cast<double>(fan_in + fan_out));
  return uniform_(t, -bound, bound);
}

}  // namespace tg::nn::init
