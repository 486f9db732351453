// Graph rewrites the CUDA graph backend applies before cutting a graph into segments.
#pragma once

#include "graphs/ir/graph.h"

namespace tg::graphs {

// Moves CPU 0-dim values that feed CUDA ops onto the device first (a device_copy node per value and
// device), so the CUDA ops can be captured and a new host value is honoured on every call.
Graph stage_cpu_scalars(const Graph& graph);

// Copies a tensor to another device; what stage_cpu_scalars inserts.
class StageToDeviceOp final : public Op {
 public:
  explicit StageToDeviceOp(Device device) : device_(device) {}
  const OpSchema& schema() const override;
  std::vector<TensorMeta> infer(const TensorList& inputs) const override;
  void eval(const TensorList& inputs, TensorList& outputs) const override;
  std::string attrs() const override { return "device=" + device_.str(); }

 private:
  Device device_;
};

}  // namespace tg::graphs
