// Shared pieces of the factory op files: size checks, attribute text, and requires_grad handling.
#pragma once

#include <string>
#include <string_view>

#include "ops/core/op.h"

namespace tg {

// Errors when a requested size is negative; the message names the op and the whole size list.
void check_factory_sizes(std::string_view op, const Shape& sizes);

// "size=[2, 3], dtype=float32, device=cpu": the attributes every factory prints.
std::string factory_attrs(const Shape& sizes, DType dtype, Device device);

// Applies options.requires_grad to a freshly made factory result.
Tensor finish_factory(Tensor t, const TensorOptions& options);

}  // namespace tg
