// See graphs/passes/split_gradients.h.
#include "graphs/passes/split_gradients.h"

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "graphs/ir/graph_edit.h"
#include "graphs/logs.h"
#include "graphs/passes/node_patterns.h"
#include "ops/attention/flash_attention.h"
#include "ops/shape/join.h"
#include "ops/shape/view.h"

namespace tg::graphs {
namespace {

// One piece of the sum: the slice_backward node that made it.
struct Piece {
  int32_t node;
  SliceBackwardRegion region;
};

// What the add tree under value v sums, walking adds whose results only their parent add reads;
// false when a leaf is not a slice_backward read only by the tree. `inner` collects the adds.
bool collect_pieces(const Graph& graph, const std::vector<std::vector<int32_t>>& readers,
                    const std::vector<bool>& is_output, ValueId v, bool root, std::vector<Piece>& pieces,
                    std::vector<int32_t>& inner) {
  const Value& value = graph.values[static_cast<size_t>(v)];
  if (value.producer < 0) return false;
  if (!root && (readers[static_cast<size_t>(v)].size() != 1 || is_output[static_cast<size_t>(v)])) return false;
  const GraphNode& n = graph.nodes[static_cast<size_t>(value.producer)];
  if (is_plain_add(graph, n)) {
    if (!root) inner.push_back(value.producer);
    return collect_pieces(graph, readers, is_output, n.inputs[0], false, pieces, inner) &&
           collect_pieces(graph, readers, is_output, n.inputs[1], false, pieces, inner);
  }
  if (root) return false;
  std::optional<SliceBackwardRegion> region = slice_backward_region(*n.op);
  if (!region || region->step != 1 || n.inputs.size() != 1 || n.inputs[0] < 0) return false;
  pieces.push_back({value.producer, std::move(*region)});
  return true;
}

// True when the pieces share one shape and dim, match the sum's metadata, and (sorted by start)
// tile [0, size) of the dim.
bool tiles_dim(const Graph& graph, std::vector<Piece>& pieces, const TensorMeta& sum) {
  if (pieces.size() < 2) return false;
  const SliceBackwardRegion& first = pieces[0].region;
  for (const Piece& p : pieces) {
    if (p.region.sizes != first.sizes || p.region.dim != first.dim) return false;
    const GraphNode& n = graph.nodes[static_cast<size_t>(p.node)];
    if (graph.values[static_cast<size_t>(n.inputs[0])].meta.dtype != sum.dtype) return false;
  }
  if (sum.sizes != first.sizes) return false;
  std::sort(pieces.begin(), pieces.end(), [](const Piece& a, const Piece& b) { return a.region.start < b.region.start; });
  int64_t at = 0;
  for (const Piece& p : pieces) {
    if (p.region.start != at || p.region.end <= p.region.start) return false;
    at = p.region.end;
  }
  return at == first.sizes[static_cast<size_t>(first.dim)];
}

// True when value v is a contiguous [sizes] at offset 0 (a row-major view of its whole buffer).
bool contiguous_whole(const Graph& graph, ValueId v, const Shape& sizes) {
  return meta_of_value(graph, v).sizes == sizes && is_contiguous_value(graph, v);
}

// The output of the view node that alone reads v, when that output is contiguous_whole of `sizes`;
// -1 otherwise. The view node goes to `chain`.
ValueId sole_view_as(const Graph& graph, const std::vector<std::vector<int32_t>>& readers,
                     const std::vector<bool>& is_output, ValueId v, const Shape& sizes, std::vector<int32_t>& chain) {
  const int32_t r = sole_reader(readers, is_output, v);
  if (r < 0) return -1;
  const GraphNode& n = graph.nodes[static_cast<size_t>(r)];
  if (!is_single_view(n) || !contiguous_whole(graph, n.outputs[0], sizes)) return -1;
  chain.push_back(r);
  return n.outputs[0];
}

}  // namespace

int merge_split_gradients(Graph& graph) {
  const std::vector<std::vector<int32_t>> readers = readers_of(graph);
  const std::vector<bool> is_output = graph_outputs(graph);
  std::vector<bool> removed(graph.nodes.size(), false);
  int merged = 0;
  // From the last node back, so that the largest tree is met before the adds inside it.
  for (auto i = static_cast<int32_t>(graph.nodes.size()) - 1; i >= 0; --i) {
    GraphNode& root = graph.nodes[static_cast<size_t>(i)];
    if (removed[static_cast<size_t>(i)] || !is_plain_add(graph, root)) continue;
    std::vector<Piece> pieces;
    std::vector<int32_t> inner;
    if (!collect_pieces(graph, readers, is_output, root.outputs[0], true, pieces, inner)) continue;
    if (!tiles_dim(graph, pieces, graph.values[static_cast<size_t>(root.outputs[0])].meta)) continue;
    std::vector<ValueId> grads;
    for (const Piece& p : pieces) {
      grads.push_back(graph.nodes[static_cast<size_t>(p.node)].inputs[0]);
      removed[static_cast<size_t>(p.node)] = true;
    }
    for (int32_t n : inner) removed[static_cast<size_t>(n)] = true;
    root.op = cat_op(pieces[0].region.dim, grads.size());
    root.inputs = std::move(grads);
    ++merged;
  }
  if (merged > 0) {
    drop_nodes(graph, removed);
    log_line("fusion", std::to_string(merged) + " split gradient(s) summed as one cat");
  }
  return merged;
}

int pack_attention_gradients(Graph& graph) {
  const std::vector<std::vector<int32_t>> readers = readers_of(graph);
  const std::vector<bool> is_output = graph_outputs(graph);
  std::vector<bool> removed(graph.nodes.size(), false);
  int packed = 0;
  for (GraphNode& n : graph.nodes) {
    if (n.outputs.size() != 3) continue;
    OpPtr op = packed_attention_gradients_op(*n.op);
    if (!op) continue;
    const TensorMeta& g = meta_of_value(graph, n.outputs[0]);
    if (!g.device.is_cuda() || g.sizes.size() != 4) continue;
    const int64_t B = g.sizes[0], H = g.sizes[1], L = g.sizes[2], D = g.sizes[3];
    // Each gradient [B, H, L, D], laid out as [B, L, H, D], viewed as those rows and then as [B, L, H * D],
    // the three views joined by one cat into [B, L, 3 * H * D]: exactly the packed layout.
    std::vector<int32_t> chain;
    std::vector<ValueId> flat;
    int32_t cat = -1;
    for (ValueId grad : n.outputs) {
      if (meta_of_value(graph, grad).sizes != g.sizes) break;
      const ValueId rows = sole_view_as(graph, readers, is_output, grad, {B, L, H, D}, chain);
      const ValueId joined = rows < 0 ? -1 : sole_view_as(graph, readers, is_output, rows, {B, L, H * D}, chain);
      const int32_t reader = joined < 0 ? -1 : sole_reader(readers, is_output, joined);
      if (reader < 0 || (cat >= 0 && reader != cat)) break;
      cat = reader;
      flat.push_back(joined);
    }
    if (flat.size() != 3) continue;
    const GraphNode& c = graph.nodes[static_cast<size_t>(cat)];
    if (removed[static_cast<size_t>(cat)] || c.op->name() != "cat" || c.inputs != flat || c.outputs.size() != 1 ||
        !contiguous_whole(graph, c.outputs[0], {B, L, 3 * H * D}))
      continue;
    for (ValueId grad : n.outputs) graph.values[static_cast<size_t>(grad)].producer = -1;  // computed no more
    n.op = std::move(op);
    n.outputs = {c.outputs[0]};
    graph.values[static_cast<size_t>(c.outputs[0])].output_index = 0;
    for (int32_t r : chain) removed[static_cast<size_t>(r)] = true;
    removed[static_cast<size_t>(cat)] = true;
    ++packed;
  }
  if (packed > 0) {
    drop_nodes(graph, removed);
    log_line("fusion", std::to_string(packed) + " attention gradient triple(s) written packed, without their cat");
  }
  return packed;
}

}  // namespace tg::graphs
