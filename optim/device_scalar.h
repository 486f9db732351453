// Optimizer hyperparameters on the device: a host value mirrored as 0-dim tensors that fused
// updates read, so that changing the value writes memory instead of changing a traced graph.
#pragma once

#include <string>
#include <vector>

#include "ops/core/guarded_value.h"
#include "tensor/tensor.h"

namespace tg::optim {

// One scalar hyperparameter (the learning rate; later betas, weight decay, a clip threshold): the
// host value, and one 0-dim copy per device it was asked for. A compiled update that reads the copy
// (a captured tensor: its address is part of the graph, its value is not) follows every set()
// without re-tracing or re-recording; code that reads the host value under tracing bakes it in and
// records a guard, so a later set() recompiles it instead of replaying a stale value.
class DeviceScalar {
 public:
  // `name` appears in recompile reasons; copies are float64 by default, so that a device update
  // reads exactly the host value.
  DeviceScalar(std::string name, double value, DType dtype = kFloat64);
  DeviceScalar(const DeviceScalar&) = delete;
  DeviceScalar& operator=(const DeviceScalar&) = delete;

  // The host value; read while tracing, it is baked into the graph and guarded.
  double value() const { return host_.get(); }
  // The host value without a guard (saving, printing, schedulers).
  double peek() const { return host_.peek(); }
  // Sets the host value and fills every device copy in place (one host-to-device fill each; the
  // copies keep their addresses, so recorded CUDA graphs read the new value on their next replay).
  void set(double value);
  // The copy on `device`, made on first use (outside any trace, so it is a captured tensor of the
  // graphs that read it, never a constant baked into them).
  Tensor on(Device device);
  // The dtype of the device copies.
  DType dtype() const { return dtype_; }

 private:
  Guarded<double> host_;
  DType dtype_;
  std::vector<Tensor> copies_;  // at most one per device
};

}  // namespace tg::optim
