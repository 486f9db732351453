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
  // A fresh output of a node, as the node's infer() gives it for the graph's input metadata.
  struct PlannedOutput {
    Shape sizes, strides;
    DType dtype;
    Device device;
    int64_t nbytes;
  };
  // How node outputs are made when the inputs have the metadata the graph was traced with: a
  // `direct` node (fresh outputs only) gets them allocated from the plan and its kernel called
  // straight, without infer() re-deriving (and re-checking) what tracing already derived.
  struct NodePlan {
    bool direct = false;
    bool launch = false;  // some output has elements (zero-element outputs launch nothing)
    std::vector<PlannedOutput> outputs;
  };
  void plan_nodes();
  bool matches_plan(const TensorList& inputs) const;
  void run_range(std::vector<Tensor>& env, size_t first, size_t last, bool planned) const;

  const Graph& graph_;
  std::vector<std::vector<ValueId>> release_after_;  // per node: values whose last use it is
  std::vector<NodePlan> plans_;                      // per node; empty when the graph has no plan
  bool planning_tried_ = false;                      // plan_nodes() ran (at the first run())
};

}  // namespace tg::graphs
