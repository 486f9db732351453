// In-place random fills: a tensor overwritten with the draws the factory of its shape would make,
// without a second tensor and a copy (the parameter initializers of nn/init.h use them).
#pragma once

#include <cstdint>

#include "tensor/tensor.h"

namespace tg {

// Overwrites t (floating) with what rand(t.sizes(), same dtype and device) would draw, from the
// same generator offsets.
Tensor& fill_rand_(Tensor& t);
// Overwrites t (floating) with what randn(t.sizes(), same dtype and device) would draw.
Tensor& fill_randn_(Tensor& t);
// Advances the generator past the blocks rand or randn of `numel` elements of `dtype` would take,
// drawing nothing: the later draws are then those that follow such a call.
void skip_random_draws(int64_t numel, DType dtype);

}  // namespace tg
