// What runs a Graph: the interpreter (aot_eager) or the CUDA graph executor (cudagraphs).
#pragma once

#include "tensor/tensor.h"

namespace tg::graphs {

// Runs one graph on inputs given in the order of graph.inputs; returns graph.outputs.
class Executor {
 public:
  virtual ~Executor() = default;
  virtual TensorList run(const TensorList& inputs) = 0;
  // run() on inputs the caller hands over (it keeps no reference): each may be freed after its
  // last use in the graph, and its memory reused by the rest of the graph.
  virtual TensorList run_consuming(TensorList&& inputs) { return run(inputs); }
};

}  // namespace tg::graphs
