// What runs a Graph: the interpreter (aot_eager) or the CUDA graph executor (cudagraphs).
#pragma once

#include "tensor/tensor.h"

namespace tg::graphs {

// Runs one graph on inputs given in the order of graph.inputs; returns graph.outputs.
class Executor {
 public:
  virtual ~Executor() = default;
  virtual TensorList run(const TensorList& inputs) = 0;
};

}  // namespace tg::graphs
