#include "ops/random/dropout.h"

#include "ops/elementwise/binary.h"
#include "ops/elementwise/compare.h"
#include "ops/factory/factory.h"

namespace tg {

Tensor dropout(const Tensor& input, double p, bool training) {
  TG_CHECK(p >= 0 && p <= 1, "[dropout] probability has to be between 0 and 1, but got ", p);
  TG_CHECK(input.defined(), "[dropout] got an undefined tensor");
  if (!training || p == 0) return input;
  if (p == 1) return input * 0;
  TG_CHECK(is_floating(input.dtype()), "[dropout] expected a floating-point tensor, got ", dtype_name(input.dtype()));
  return input * ge(rand_like(input), p) * (1.0 / (1.0 - p));
}

}  // namespace tg
