// Node shapes that several passes match: plain adds, dtype casts and single views.
#pragma once

#include "graphs/ir/graph.h"

namespace tg::graphs {

// The metadata of value v.
const TensorMeta& meta_of_value(const Graph& graph, ValueId v);
// True for a plain two-operand add (a + b, alpha 1).
bool is_plain_add(const Graph& graph, const GraphNode& n);
// True for a dtype-changing cast on one device into a contiguous result.
bool is_dtype_cast(const Graph& graph, const GraphNode& n);
// True when v's metadata describe a contiguous tensor at offset 0.
bool is_contiguous_value(const Graph& graph, ValueId v);
// True for a view op with one input and one output.
bool is_single_view(const GraphNode& n);

}  // namespace tg::graphs
