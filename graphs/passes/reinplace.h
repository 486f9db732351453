// The reinplace pass: functionalized writes into graph inputs become in-place ops again where that
// is unobservable, so updates of large inputs (an optimizer's parameters) need no second buffer.
#pragma once

#include <vector>

#include "graphs/ir/graph.h"

namespace tg::graphs {

// Rewrites, in order, each FunctionalizedOp node whose written value is graph input `inputs[k]` (-1:
// leave that input's writes functional) (or
// the in-place result of an earlier rewritten write to it) and that no later node, and no graph
// output, reads in its old state: the node runs the original in-place op on that memory instead.
// Returns, per entry of `finals` (the final value of the k-th written input), whether that final
// value now lives in the input itself, so that no write-back is needed.
std::vector<bool> reinplace(Graph& graph, const std::vector<ValueId>& inputs, const std::vector<ValueId>& finals);

}  // namespace tg::graphs
