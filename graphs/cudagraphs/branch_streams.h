// Which nodes of a captured segment run on a branch stream, beside the nodes recorded after them: the
// products and reductions that make weight and bias gradients, which nothing reads until later. In
// the CUDA graph they become a parallel branch, so the critical path (the input gradients) shortens.
#pragma once

#include <cstdint>
#include <set>
#include <vector>

#include "graphs/ir/graph.h"

namespace tg::graphs {

// Per entry of `nodes` (indices into graph.nodes, in run order): true for a node whose op is a
// product or reduction that writes only fresh outputs, and which at least one other kernel-launching
// node that stays on the main stream runs after and before its first reader in `nodes` (or the end).
std::vector<bool> plan_branch_nodes(const Graph& graph, const std::vector<int32_t>& nodes);

// The memory that branch work recorded since the last join reads and writes (storages, so views
// count), which tells when a node recorded on the main stream must wait for that work first.
class PendingBranches {
 public:
  // Notes branch work that read `reads` and wrote `writes`.
  void add(const TensorList& reads, const TensorList& writes);
  // True when `op` run on the main stream over `args` reads memory the branches write, or writes
  // memory they use.
  bool conflicts(const Op& op, const TensorList& args) const;
  // Forgets everything (after a join).
  void clear();
  bool empty() const { return read_.empty() && written_.empty(); }

 private:
  std::set<const void*> read_, written_;
};

}  // namespace tg::graphs
