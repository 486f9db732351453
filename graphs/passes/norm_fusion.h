// Residual adds folded into the layer_norm after them: a pre-norm transformer adds each block's
// output to the residual stream and normalizes the sum right away (and under autocast casts the
// normalized rows to 16 bits for the next product), three kernels and three passes over memory
// where add_layer_norm (ops/norm/add_layer_norm.h) makes one.
#pragma once

#include "graphs/ir/graph.h"

namespace tg::graphs {

// Forward graph, CUDA values only: a plain add (alpha 1, operands and sum of one shape, contiguous)
// whose sum a layer_norm reads becomes one add_layer_norm node computing the sum (still read by
// the add's other readers), the normalized rows and the statistics; when the normalized rows'
// only reader is a dtype-changing cast (and they are no graph output), the cast folds in and the
// node writes them in the cast's dtype. The node takes the add's place when the norm's parameters
// exist there, else the norm's when nothing reads the sum in between. Values and outputs are
// those of the nodes replaced. Returns the number of adds folded.
int fuse_add_layer_norm(Graph& graph);

// Backward graph, CUDA values only: a layer_norm backward whose input gradient only an add reads
// (the sum's gradient: it meets the gradient of the sum's other readers) becomes one
// add_layer_norm_backward node computing that sum, with the cast of the incoming gradient that
// only it reads folded in, and one dtype-changing cast of the sum (the 16-bit update's gradient)
// written by the same node. The node takes the norm backward's place, so the add's other operand
// must exist there. Values and outputs are those of the nodes replaced. Returns the number fused.
int fuse_add_layer_norm_backward(Graph& graph);

}  // namespace tg::graphs
