// Elementwise functions of one tensor (some with scalar parameters).
#pragma once

#include <optional>
#include <string>

#include "tensor/tensor.h"

namespace tg {

Tensor neg(const Tensor& x);
Tensor pow(const Tensor& x, Scalar exponent);
Tensor abs(const Tensor& x);
// x * x, as torch.square.
Tensor square(const Tensor& x);
// Sign: -1, 0 or 1.
Tensor sgn(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor sin(const Tensor& x);
Tensor cos(const Tensor& x);
// The error function, 2/sqrt(pi) * integral of exp(-t^2) from 0 to x.
Tensor erf(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor relu(const Tensor& x);
// approximate: "none" (exact, erf) or "tanh".
Tensor gelu(const Tensor& x, const std::string& approximate = "none");
// Writes gelu(x) into `out` (x's shape and dtype) with no tape record: for kernels filling their own
// outputs, where gelu() would allocate a result and a copy would move it again.
void gelu_into(const Tensor& x, const std::string& approximate, const Tensor& out);
// x * sigmoid(x) (also called swish).
Tensor silu(const Tensor& x);
// log(1 + exp(beta * x)) / beta, reverting to x where beta * x > threshold (numerical stability).
Tensor softplus(const Tensor& x, Scalar beta = 1, Scalar threshold = 20);
Tensor sqrt(const Tensor& x);
Tensor rsqrt(const Tensor& x);
Tensor trunc(const Tensor& x);
// Limits values to [min, max]; either bound may be omitted (not both).
Tensor clamp(const Tensor& x, std::optional<Scalar> min, std::optional<Scalar> max);
// Limits values elementwise to [min, max] with tensor bounds (broadcast with x); either may be
// undefined (not both). NaN in x or a bound gives NaN; where min > max the result is max.
Tensor clamp(const Tensor& x, const Tensor& min, const Tensor& max);
// clamp(x, min, Tensor()) and clamp(x, Tensor(), max).
Tensor clamp_min(const Tensor& x, const Tensor& min);
Tensor clamp_max(const Tensor& x, const Tensor& max);

}  // namespace tg
