// The aot_eager executor: runs a graph's nodes straight on kernels, freeing buffers after last use.
#pragma once

#include <vector>

#include "graphs/runtime/executor.h"
#include "graphs/ir/graph.h"

namespace tg::graphs {

// Runs a Graph without dispatch bookkeeping: no tape, no observer. Inputs are given in the order
// of graph.inputs; the result holds graph.outputs (undefined where an output id is -1).
class Interpreter final : public Executor {
 public:
  explicit Interpreter(const Graph& graph);
  TensorList run(TensorList inputs) override;
  // Runs nodes [first, last) of the graph over `env` (values by id), releasing dead values.
  void run_nodes(std::vector<Tensor>& env, size_t first, size_t last) const;
  // The values whose last reader (or, never read, whose producer) is node `i`; graph outputs and
  // constants are never among them.
  const std::vector<ValueId>& released_after(size_t i) const { return release_after_[i]; }
  const Graph& graph() const { return graph_; }

 private:
  const Graph& graph_;
  std::vector<std::vector<ValueId>> release_after_;  // per node: values whose last use it is
};

}  // namespace tg::graphs
