// Elementwise fusion of compiled graphs on CUDA: chains and DAGs of elementwise ops become one
// fused_elementwise node each (one generated kernel), applied after partitioning.
#pragma once

#include "graphs/ir/graph.h"
#include "graphs/partition/partition.h"

namespace tg::graphs {

// Limits of one group: the generated kernel's parameter block holds a pointer and the strides of
// every input (at most 25 dims), which must stay within CUDA's 4 KiB of kernel parameters.
inline constexpr int kMaxFusedInputs = 12;
inline constexpr int kMaxFusedOps = 256;
inline constexpr int kMaxFusedDims = 25;

// Replaces each group of two or more out-of-place elementwise ops (ops that describe their math:
// unary, binary and scalar forms, comparisons, where, casts, activation gradients) on one CUDA
// device whose intermediate results are read only inside the group and are no graph outputs with
// one fused_elementwise node where the group's last op was. Views, in-place and random ops,
// reductions, matmuls and ops with an operand elsewhere (a CPU scalar) stay as they are; inputs of
// a group may broadcast and have any strides. With TG_LOGS=fusion, prints each new kernel's
// source once. Returns the number of groups.
int fuse_elementwise_chains(Graph& graph);

// The elementwise fusion pass over both graphs of a partition (CompileOptions::fuse_elementwise);
// logs the number of groups under TG_LOGS=fusion.
void fuse_elementwise(Partition& partition);

}  // namespace tg::graphs
