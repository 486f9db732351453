#include "nn/activation.h"

#include "ops/elementwise/elementwise.h"
#include "ops/elementwise/unary.h"
#include "ops/random/dropout.h"

namespace tg::nn {

Tensor ReLU::forward(const Tensor& input) { return relu(input); }

GELU::GELU(std::string approximate) : approximate_(std::move(approximate)) {
  TG_CHECK(approximate_ == "none" || approximate_ == "tanh", "[GELU] approximate must be \"none\" or \"tanh\", got \"",
           approximate_, "\"");
}

Tensor GELU::forward(const Tensor& input) { return gelu(input, approximate_); }

std::string GELU::extra_repr() const { return approximate_ == "none" ? "" : "approximate='" + approximate_ + "'"; }

Tensor SiLU::forward(const Tensor& input) { return silu(input); }

Softplus::Softplus(double beta, double threshold) : beta_(beta), threshold_(threshold) {}

Tensor Softplus::forward(const Tensor& input) { return softplus(input, beta_, threshold_); }

std::string Softplus::extra_repr() const {
  return "beta=" + scalar_str(Scalar(beta_)) + ", threshold=" + scalar_str(Scalar(threshold_));
}

Dropout::Dropout(double p) { set_p(p); }

void Dropout::set_p(double p) {
  TG_CHECK(p >= 0 && p <= 1, "[Dropout] probability has to be between 0 and 1, but got ", p);
  p_.set(p);
}

Tensor Dropout::forward(const Tensor& input) { return dropout(input, p_.get(), is_training()); }

std::string Dropout::extra_repr() const { return "p=" + std::to_string(p_.peek()); }

Tensor Tanh::forward(const Tensor& input) { return tanh(input); }

}  // namespace tg::nn
