// Split gradients as one cat: the backward of a tensor cut into pieces (split, chunk, narrow of
// every part of a dim) is, node by node, a zero-filled copy of the whole tensor per piece
// (slice_backward) and a sum of those copies. Where the pieces' gradients cover the dim exactly,
// the sum is the pieces' gradients side by side.
#pragma once

#include "graphs/ir/graph.h"

namespace tg::graphs {

// Replaces each tree of add nodes (alpha 1, every inner result read only by the tree and no graph
// output) whose leaves are two or more slice_backward nodes of one shape, dim and step 1, read only
// by the tree, whose ranges tile the whole dim and whose dtype is the sum's, with one cat of the
// gradients in range order where the tree's root was. Any device. Returns the number of trees.
int merge_split_gradients(Graph& graph);

}  // namespace tg::graphs
