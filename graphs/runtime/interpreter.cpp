// See Note [Compile pipeline] in docs/compile_pipeline.md.
#include "graphs/runtime/interpreter.h"

#include <set>

#include "autograd/grad_mode.h"
#include "ops/dispatch.h"
#include "tensor/cuda_runtime.h"

namespace tg::graphs {

Interpreter::Interpreter(const Graph& graph) : graph_(graph), release_after_(graph.nodes.size()) {
  std::vector<int32_t> last_use(graph.values.size(), -1);
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    for (ValueId v : graph.nodes[i].outputs)  // a value nobody reads goes right after the node that made it
      if (v >= 0) last_use[static_cast<size_t>(v)] = static_cast<int32_t>(i);
    for (ValueId v : graph.nodes[i].inputs)
      if (v >= 0) last_use[static_cast<size_t>(v)] = static_cast<int32_t>(i);
  }
  std::set<ValueId> keep(graph.outputs.begin(), graph.outputs.end());
  for (const auto& [id, t] : graph.constants) keep.insert(id);
  for (size_t v = 0; v < last_use.size(); ++v)
    if (last_use[v] >= 0 && !keep.count(static_cast<ValueId>(v)))
      release_after_[static_cast<size_t>(last_use[v])].push_back(static_cast<ValueId>(v));
}

TensorList Interpreter::run(TensorList inputs) {
  TG_CHECK(inputs.size() == graph_.inputs.size(), "[interpreter] graph expects ", graph_.inputs.size(),
           " inputs, got ", inputs.size());
  NoGradGuard no_grad;
  std::vector<Tensor> env(graph_.values.size());
  for (const auto& [id, t] : graph_.constants) env[static_cast<size_t>(id)] = t;
  for (size_t i = 0; i < inputs.size(); ++i) env[static_cast<size_t>(graph_.inputs[i].value)] = std::move(inputs[i]);
  run_nodes(env, 0, graph_.nodes.size());
  TensorList result;
  result.reserve(graph_.outputs.size());
  for (ValueId v : graph_.outputs) result.push_back(v >= 0 ? env[static_cast<size_t>(v)] : Tensor());
  return result;
}

void Interpreter::run_nodes(std::vector<Tensor>& env, size_t first, size_t last) const {
  TensorList args;
  for (size_t i = first; i < last; ++i) {
    const GraphNode& n = graph_.nodes[i];
    args.clear();
    for (ValueId v : n.inputs) args.push_back(v >= 0 ? env[static_cast<size_t>(v)] : Tensor());
    const OpPtr op = n.op->has(kRandom) ? n.op->redraw() : n.op;
    TensorList outs = run_kernel(*op, args);
    args.clear();
    for (size_t k = 0; k < n.outputs.size(); ++k) env[static_cast<size_t>(n.outputs[k])] = std::move(outs[k]);
    for (ValueId v : release_after_[i]) env[static_cast<size_t>(v)] = Tensor();
  }
  // Asynchronous collectives finish before anyone reads the results (and inside a capture, before
  // it ends: a captured fork must join).
  cuda::join_forked_work();
}

}  // namespace tg::graphs
