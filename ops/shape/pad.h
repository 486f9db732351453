// Padding (torch.nn.functional.pad): constant, reflect, replicate and circular modes, built from views and cat
// so that gradients, CUDA and tracing come from those ops.
#pragma once

#include <string>

#include "tensor/tensor.h"

namespace tg {

// Pads the last len(pad)/2 dims of x; pad lists (before, after) amounts starting from the last dim,
// as PyTorch's F.pad does. "constant" fills with `value` (negative amounts crop); "reflect" mirrors
// without repeating the edge (amounts < the dim's size); "replicate" repeats the edge; "circular"
// wraps around (amounts <= the dim's size). The non-constant modes pad any number of trailing dims
// of an input with at least one more dim (PyTorch: 1 to 3 dims of a batched or unbatched input).
Tensor pad(const Tensor& x, const Shape& pad, const std::string& mode = "constant", double value = 0.0);

}  // namespace tg
