// Elementwise functions of one tensor (some with scalar parameters).
#pragma once

#include <optional>
#include <string>

#include "tensor/tensor.h"

namespace tg {

Tensor neg(const Tensor& x);
Tensor pow(const Tensor& x, Scalar exponent);
Tensor abs(const Tensor& x);
// Sign: -1, 0 or 1.
Tensor sgn(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor sin(const Tensor& x);
Tensor cos(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor relu(const Tensor& x);
// approximate: "none" (exact, erf) or "tanh".
Tensor gelu(const Tensor& x, const std::string& approximate = "none");
Tensor sqrt(const Tensor& x);
Tensor rsqrt(const Tensor& x);
Tensor trunc(const Tensor& x);
// Limits values to [min, max]; either bound may be omitted (not both).
Tensor clamp(const Tensor& x, std::optional<Scalar> min, std::optional<Scalar> max);

}  // namespace tg
