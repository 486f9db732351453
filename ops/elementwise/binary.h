// Elementwise arithmetic on two operands, with broadcasting and type promotion.
#pragma once

#include "tensor/tensor.h"

namespace tg {

// a + alpha * b
Tensor add(const Tensor& a, const Tensor& b, Scalar alpha = 1);
Tensor add(const Tensor& a, Scalar b);
// a - alpha * b
Tensor sub(const Tensor& a, const Tensor& b, Scalar alpha = 1);
Tensor sub(const Tensor& a, Scalar b);
// b - a (scalar minus tensor)
Tensor rsub(const Tensor& a, Scalar b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, Scalar b);
// True division: integer inputs give float32.
Tensor div(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, Scalar b);
// b / a (scalar over tensor)
Tensor rdiv(const Tensor& a, Scalar b);
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);
// base ** exponent elementwise (broadcast); integer results take 0 for negative exponents except for
// bases 1 and -1. The exponent's gradient is out * log(base), 0 where base == 0 and exponent >= 0.
Tensor pow(const Tensor& base, const Tensor& exponent);
Tensor pow(Scalar base, const Tensor& exponent);

}  // namespace tg
