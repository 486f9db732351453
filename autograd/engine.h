// The backward engine: runs tape nodes in reverse creation order from the given roots.
#pragma once

#include <optional>

#include "tensor/tensor.h"

namespace tg {

// Accumulates gradients of `outputs` into the .grad of the leaves they depend on.
// grad_outputs may be empty (each output must then have one element: its gradient is 1).
void backward(const TensorList& outputs, const TensorList& grad_outputs = {}, bool retain_graph = false,
              bool create_graph = false);

// Returns d(outputs)/d(inputs) without touching any .grad. retain_graph defaults to create_graph.
// With allow_unused, inputs the outputs do not depend on get an undefined tensor instead of an error.
TensorList grad(const TensorList& outputs, const TensorList& inputs, const TensorList& grad_outputs = {},
                std::optional<bool> retain_graph = {}, bool create_graph = false, bool allow_unused = false);

class Node;
struct Edge;
// grad() with the inputs given as the edges their gradients arrive at (recorded before the inputs
// were written in place): what graph tracing uses to differentiate w.r.t. function inputs.
TensorList grad_at_edges(const TensorList& outputs, const std::vector<Edge>& inputs, const TensorList& grad_outputs,
                         bool retain_graph, bool create_graph, bool allow_unused);

// The sequence number of the tape node whose backward is running on this thread (-1 when none);
// graph tracing tags backward ops with it.
int64_t current_backward_sequence_nr();

}  // namespace tg
