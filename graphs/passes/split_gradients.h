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

// Replaces each CUDA flash_attention_backward whose three gradients are each viewed as [B, L, H * D]
// rows and joined, in order, by one cat into [B, L, 3 * H * D] (the gradient of the projection q, k
// and v were split from, as merge_split_gradients leaves it), with one packed node writing the cat's
// result: cuDNN writes each gradient into its third of every row, and the views and the cat's
// copies go. Returns how many it packed.
int pack_attention_gradients(Graph& graph);

}  // namespace tg::graphs
