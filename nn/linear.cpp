#include "nn/linear.h"

#include <cmath>

#include "nn/init.h"
#include "ops/factory/factory.h"
#include "ops/linalg/matmul.h"

namespace tg::nn {

Linear::Linear(int64_t in_features, int64_t out_features, bool bias, TensorOptions options)
    : in_features_(in_features), out_features_(out_features) {
  TG_CHECK(in_features > 0 && out_features > 0, "[Linear] in_features and out_features must be positive, got ",
           in_features, " and ", out_features);
  options.dtype = options.dtype_or(kFloat32);
  TG_CHECK(is_floating(*options.dtype), "[Linear] parameters need a floating dtype, got ",
           dtype_name(*options.dtype));
  options.requires_grad = false;
  Tensor w = empty({out_features, in_features}, options);
  init::kaiming_uniform_(w, std::sqrt(5.0));
  weight_ = register_parameter("weight", w);
  if (bias) {
    Tensor b = empty({out_features}, options);
    const double bound = 1.0 / std::sqrt(static_cast<double>(in_features));
    init::uniform_(b, -bound, bound);
    bias_ = register_parameter("bias", b);
  }
}

Tensor Linear::forward(const Tensor& input) {
  TG_CHECK(input.dim() >= 1 && input.size(-1) == in_features_, "[Linear] expected input with last dim ",
           in_features_, " (in_features), got shape ", shape_str(input.sizes()));
  return linear(input, weight_, bias_);
}

std::string Linear::extra_repr() const {
  return "in_features=" + std::to_string(in_features_) + ", out_features=" + std::to_string(out_features_) +
         ", bias=" + (bias_.defined() ? "true" : "false");
}

}  // namespace tg::nn
