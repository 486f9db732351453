// Parameter gradients written in float32 by the products that make them. Under autocast a weight's
// gradient is a 16-bit product (the weight was cast to 16 bits in the forward) that the backward
// rounds to 16 bits and then casts to the parameter's float32: two passes over every weight
// gradient, one of them a rounding. This pass lets the producer write the float32 gradient itself.
#pragma once

#include "graphs/ir/graph.h"

namespace tg::graphs {

// Backward graph: each cast of a 16-bit value to float32 whose result is a graph output no node
// reads (a parameter's gradient), where the cast is the value's only reader and the value comes
// from mm (which then sums into a float32 result: mm's out_dtype) or from one gradient of
// linear_cross_entropy_grads_scale (already float32 inside, then written as float32). The cast goes
// and the producer computes the graph output; the gradient is the float32 sum, not that sum rounded
// to 16 bits. Returns the number of casts removed.
int widen_parameter_gradients(Graph& graph);

}  // namespace tg::graphs
