// Padding (torch.nn.functional.pad): constant, reflect and replicate modes, built from views and cat
// so that gradients, CUDA and tracing come from those ops.
#pragma once

#include <string>

#include "tensor/tensor.h"

namespace tg {

// Pads the last len(pad)/2 dims of x; pad lists (before, after) amounts starting from the last dim,
// as PyTorch's F.pad does. "constant" fills with `value` (negative amounts crop); "reflect" mirrors
// without repeating the edge (amounts < the dim's size); "replicate" repeats the edge.
Tensor pad(const Tensor& x, const Shape& pad, const std::string& mode = "constant", double value = 0.0);

}  // namespace tg
