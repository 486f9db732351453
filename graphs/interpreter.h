// The aot_eager executor: runs a graph's nodes straight on kernels, freeing buffers after last use.
#pragma once

#include <vector>

#include "graphs/graph.h"

namespace tg::graphs {

// Runs a Graph without dispatch bookkeeping: no tape, no observer. Inputs are given in the order
// of graph.inputs; the result holds graph.outputs (undefined where an output id is -1).
class Interpreter {
 public:
  explicit Interpreter(const Graph& graph);
  TensorList run(const TensorList& inputs) const;
  const Graph& graph() const { return graph_; }

 private:
  const Graph& graph_;
  std::vector<std::vector<ValueId>> release_after_;  // per node: values whose last use it is
};

}  // namespace tg::graphs
