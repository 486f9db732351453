#include "graphs/passes/input_writes.h"

#include <memory>

#include "graphs/capture/functional_ops.h"
#include "graphs/passes/reinplace.h"

namespace tg::graphs {

std::vector<bool> lower_input_writes(Graph& fw, const JointGraph& joint, const std::vector<bool>& read_in_place,
                                     bool write_back) {
  const size_t n_out = joint.num_user_outputs;
  // The graph input each mutated input arrives as (-1 where it is copied in), and its final value.
  std::vector<ValueId> written, finals;
  for (size_t m = 0; m < joint.mutated.size(); ++m) {
    ValueId v = -1;
    for (size_t i = 0; i < fw.inputs.size(); ++i)
      if (fw.inputs[i].kind == joint.mutated[m].kind && fw.inputs[i].index == joint.mutated[m].index &&
          read_in_place[i])
        v = fw.inputs[i].value;
    written.push_back(v);
    finals.push_back(fw.outputs[n_out + m]);
  }
  std::vector<bool> in_graph = reinplace(fw, written, finals);
  if (!write_back) return in_graph;
  // Inputs with fixed addresses receive their remaining writes inside the graph (an optimizer
  // step's parameter updates are then part of its CUDA graph); others get the epilogue copy.
  for (size_t m = 0; m < joint.mutated.size(); ++m) {
    if (in_graph[m]) continue;
    for (size_t i = 0; i < fw.inputs.size(); ++i) {
      const GraphInput& in = fw.inputs[i];
      if (in.kind != joint.mutated[m].kind || in.index != joint.mutated[m].index || !read_in_place[i]) continue;
      const ValueId done = fw.add_value(fw.values[static_cast<size_t>(in.value)].meta, "written_back");
      fw.add_node(std::make_shared<const WriteBackOp>(), {in.value, finals[m]}, {done}, Phase::Forward, -1);
      in_graph[m] = true;
    }
  }
  return in_graph;
}

}  // namespace tg::graphs
