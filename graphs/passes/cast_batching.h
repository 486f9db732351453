// Parameter casts as one kernel: under autocast every parameter is cast to 16 bits on each
// forward and each weight gradient back to float32 in the backward, one small kernel per tensor
// (about 200 launches a step for GPT-2). This pass batches them into multi_tensor_cast nodes.
#pragma once

#include "graphs/ir/graph.h"

namespace tg::graphs {

// Forward graph: the _to_copy nodes that change the dtype (on one device) of graph inputs, grouped
// by (source dtype, target dtype, device), become one multi_tensor_cast node per group of two or
// more, where the group's first cast was (its sources are graph inputs, so they exist there).
// Backward graph: the same for casts whose results are graph outputs no node reads (parameter
// gradients), placed where the group's last cast was. Values, dtypes and outputs are those of the
// casts. Returns the number of casts batched.
int batch_parameter_casts(Graph& graph, bool forward);

}  // namespace tg::graphs
