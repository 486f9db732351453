// Fusions of compiled graphs, applied after partitioning (eager mode runs the unfused ops).
#pragma once

#include "graphs/graph.h"

namespace tg::graphs {

// Replaces each linear whose result only a relu reads (and that is no graph output) and that relu
// with one linear_relu node (on CUDA the ReLU then runs in the matmul's epilogue: one kernel, one
// pass over the output fewer). Returns how many pairs it fused.
int fuse_linear_relu(Graph& graph);

// Replaces each threshold_backward (a ReLU's gradient) whose result a sum_to_size over all but the
// last dimension also reads (a bias gradient) and that sum with one relu_backward_bias_grad node
// producing both (one kernel on CUDA, where the two took two passes). Returns how many it fused.
int fuse_relu_backward_bias_grad(Graph& graph);

}  // namespace tg::graphs
