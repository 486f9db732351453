// See Note [Compile pipeline] in docs/compile_pipeline.md.
#include "graphs/passes/reinplace.h"

#include <algorithm>
#include <map>

#include "graphs/capture/functional_ops.h"

namespace tg::graphs {

std::vector<bool> reinplace(Graph& graph, const std::vector<ValueId>& inputs, const std::vector<ValueId>& finals) {
  // Last node reading each value; graph outputs count as read after every node.
  const auto after_all = static_cast<int32_t>(graph.nodes.size());
  std::vector<int32_t> last_read(graph.values.size(), -1);
  for (size_t i = 0; i < graph.nodes.size(); ++i)
    for (ValueId v : graph.nodes[i].inputs)
      if (v >= 0) last_read[static_cast<size_t>(v)] = static_cast<int32_t>(i);
  std::vector<bool> is_final(graph.values.size(), false);
  for (ValueId v : finals)
    if (v >= 0) is_final[static_cast<size_t>(v)] = true;
  for (ValueId v : graph.outputs)
    if (v >= 0 && !is_final[static_cast<size_t>(v)]) last_read[static_cast<size_t>(v)] = after_all;

  // Views share their base's memory: a write must wait until every view of the old value is dead.
  std::vector<ValueId> root(graph.values.size());
  for (size_t v = 0; v < root.size(); ++v) root[v] = static_cast<ValueId>(v);
  for (const GraphNode& n : graph.nodes) {
    const int view_of = n.op->schema().view_of;
    if (!n.op->has(kView) || view_of < 0 || n.inputs[static_cast<size_t>(view_of)] < 0) continue;
    const ValueId base = root[static_cast<size_t>(n.inputs[static_cast<size_t>(view_of)])];
    for (ValueId o : n.outputs) root[static_cast<size_t>(o)] = base;
  }
  std::vector<int32_t> last_read_of_memory(graph.values.size(), -1);
  for (size_t v = 0; v < root.size(); ++v) {
    int32_t& slot = last_read_of_memory[static_cast<size_t>(root[v])];
    slot = std::max(slot, last_read[v]);
  }

  // The written input whose memory a value lives in.
  std::map<ValueId, ValueId> memory_of;
  for (ValueId v : inputs)
    if (v >= 0) memory_of[v] = v;
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    GraphNode& n = graph.nodes[i];
    const auto* fop = dynamic_cast<const FunctionalizedOp*>(n.op.get());
    if (!fop || fop->inplace()->has(kMetadataMutation)) continue;
    // Every written target must live in an input's memory whose old value is dead after this node,
    // read only here and only as the target.
    const std::vector<int> written = mutated_inputs(fop->inplace()->schema());
    std::vector<ValueId> homes;
    for (size_t j = 0; j < written.size(); ++j) {
      const ValueId target = n.inputs[static_cast<size_t>(written[j])];
      auto home = memory_of.find(target);
      if (home == memory_of.end()) break;
      const bool read_later = last_read_of_memory[static_cast<size_t>(root[static_cast<size_t>(target)])] >
                              static_cast<int32_t>(i);
      const bool read_twice = std::count(n.inputs.begin(), n.inputs.end(), target) > 1;
      const Value& out = graph.values[static_cast<size_t>(n.outputs[j])];
      const Value& in = graph.values[static_cast<size_t>(target)];
      if (read_later || read_twice || out.meta.sizes != in.meta.sizes || out.meta.dtype != in.meta.dtype) break;
      homes.push_back(home->second);
    }
    if (homes.size() != written.size()) continue;
    n.op = fop->inplace();
    for (size_t j = 0; j < written.size(); ++j) memory_of[n.outputs[j]] = homes[j];
  }

  std::vector<bool> in_place(finals.size(), false);
  for (size_t k = 0; k < finals.size(); ++k) {
    auto home = memory_of.find(finals[k]);
    in_place[k] = inputs[k] >= 0 && home != memory_of.end() && home->second == inputs[k];
  }
  return in_place;
}

}  // namespace tg::graphs
