// What runs a Graph: the interpreter (aot_eager) or the CUDA graph executor (cudagraphs).
#pragma once

#include "tensor/tensor.h"

namespace tg::graphs {

// Runs one graph on inputs given in the order of graph.inputs; returns graph.outputs. The executor
// owns the inputs it is given and drops each after its last reader: a caller that hands them over
// (std::move) lets their memory go as the graph runs.
class Executor {
 public:
  virtual ~Executor() = default;
  virtual TensorList run(TensorList inputs) = 0;
};

}  // namespace tg::graphs
