#include "nn/activation.h"

#include "ops/unary.h"

namespace tg::nn {

Tensor ReLU::forward(const Tensor& input) { return relu(input); }

GELU::GELU(std::string approximate) : approximate_(std::move(approximate)) {
  TG_CHECK(approximate_ == "none" || approximate_ == "tanh", "[GELU] approximate must be \"none\" or \"tanh\", got \"",
           approximate_, "\"");
}

Tensor GELU::forward(const Tensor& input) { return gelu(input, approximate_); }

std::string GELU::extra_repr() const { return approximate_ == "none" ? "" : "approximate='" + approximate_ + "'"; }

Tensor Tanh::forward(const Tensor& input) { return tanh(input); }

}  // namespace tg::nn
