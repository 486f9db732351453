// See Note [Branch streams] in docs/branch_streams.md.
#include "graphs/cudagraphs/branch_streams.h"

#include <algorithm>
#include <set>
#include <string_view>

namespace tg::graphs {
namespace {

// Ops whose kernels are safe on a second stream: they use no per-device scratch state shared with
// the main stream (cuBLAS gets a handle and workspace per stream; reductions allocate their own).
bool branch_op(const Op& op) {
  static const std::set<std::string_view> kOps = {"mm", "bmm", "sum", "sum_to_size", "linear_weight_bias_grad"};
  const OpSchema& s = op.schema();
  constexpr uint32_t kExcluded = kView | kInPlace | kFactory | kRandom | kDeviceCopy | kHostSync | kMetadataMutation |
                                 kCollective | kOverwritesTarget;
  return (s.flags & kExcluded) == 0 && s.also_mutates.empty() && kOps.count(s.name) > 0;
}

}  // namespace

std::vector<bool> plan_branch_nodes(const Graph& graph, const std::vector<int32_t>& nodes) {
  const size_t n = nodes.size();
  std::vector<bool> candidate(n, false);
  for (size_t p = 0; p < n; ++p) candidate[p] = branch_op(*graph.nodes[static_cast<size_t>(nodes[p])].op);
  // The position of each value's first reader inside `nodes`.
  std::vector<size_t> first_reader(graph.values.size(), n);
  for (size_t p = n; p-- > 0;)
    for (ValueId v : graph.nodes[static_cast<size_t>(nodes[p])].inputs)
      if (v >= 0) first_reader[static_cast<size_t>(v)] = p;
  std::vector<bool> branch(n, false);
  for (size_t p = 0; p < n; ++p) {
    if (!candidate[p]) continue;
    size_t join = n;
    for (ValueId v : graph.nodes[static_cast<size_t>(nodes[p])].outputs)
      if (v >= 0) join = std::min(join, first_reader[static_cast<size_t>(v)]);
    for (size_t q = p + 1; q < join && !branch[p]; ++q) {
      const Op& op = *graph.nodes[static_cast<size_t>(nodes[q])].op;
      branch[p] = !candidate[q] && (op.schema().flags & kView) == 0;
    }
  }
  return branch;
}

void PendingBranches::add(const TensorList& reads, const TensorList& writes) {
  for (const Tensor& t : reads)
    if (t.defined()) read_.insert(t.impl()->storage().get());
  for (const Tensor& t : writes)
    if (t.defined()) written_.insert(t.impl()->storage().get());
}

bool PendingBranches::conflicts(const Op& op, const TensorList& args) const {
  for (const Tensor& t : args)
    if (t.defined() && written_.count(t.impl()->storage().get())) return true;
  for (int k : mutated_inputs(op.schema())) {
    const Tensor& t = args[static_cast<size_t>(k)];
    if (t.defined() && read_.count(t.impl()->storage().get())) return true;
  }
  return false;
}

void PendingBranches::clear() {
  read_.clear();
  written_.clear();
}

}  // namespace tg::graphs
