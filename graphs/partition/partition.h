// Splitting a joint graph into a forward graph and a backward graph (default and min-cut).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "graphs/capture/joint.h"

namespace tg::graphs {

// Which partitioner compile() uses.
enum class PartitionerKind { Default, MinCut };

// Parses "default" or "min_cut"; the error lists both.
PartitionerKind parse_partitioner(const std::string& name);

// The two halves. forward: inputs are the joint's arguments and lifted tensors; outputs are the user
// outputs, then mutated-input finals, then the saved values. backward: inputs are the saved values
// (kind Saved, in order) then the tangents; outputs are the gradients of the joint's grad_primals.
struct Partition {
  Graph forward;
  Graph backward;
  std::vector<ValueId> saved;    // joint-graph ids of the saved values, in order (-1: added by a fusion)
  int64_t saved_bytes = 0;       // bytes of saved values that are not graph inputs (activations)
  int recomputed_nodes = 0;      // forward nodes the backward recomputes (min-cut)
};

// Partitions `joint`. Without gradients (no grad_primals), the backward graph is empty.
Partition partition(const JointGraph& joint, PartitionerKind kind);

// Ops the min-cut partitioner may recompute in the backward: cheap and deterministic.
bool is_recomputable(const Op& op);

}  // namespace tg::graphs
