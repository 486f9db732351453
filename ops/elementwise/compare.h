// Elementwise comparisons (bool results, no gradient) and where().
#pragma once

#include "tensor/tensor.h"

namespace tg {

Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor eq(const Tensor& a, Scalar b);
Tensor ne(const Tensor& a, Scalar b);
Tensor lt(const Tensor& a, Scalar b);
Tensor le(const Tensor& a, Scalar b);
Tensor gt(const Tensor& a, Scalar b);
Tensor ge(const Tensor& a, Scalar b);
// a where cond is true, else b (broadcast together; cond must be bool).
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
// True when shapes match and all elements are within atol + rtol * |b| (NaNs equal when equal_nan).
bool allclose(const Tensor& a, const Tensor& b, double rtol = 1e-5, double atol = 1e-8, bool equal_nan = false);
// True when shapes and all values are equal.
bool equal(const Tensor& a, const Tensor& b);

}  // namespace tg
