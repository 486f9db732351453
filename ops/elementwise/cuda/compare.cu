// CUDA launches of comparisons and where().
#include "ops/elementwise/cuda/elementwise.h"
#include "ops/elementwise/cuda/loops.cuh"
#include "ops/elementwise/elementwise_select.h"
#include "tensor/cuda/device_guard.h"

namespace tg::cuda {

void launch_compare(CompareKind kind, DType compute, const EwParams& p, const TensorIter& it) {
  DeviceGuard guard(it.device.index);
  ew::visit_compare(kind, compute, p, Launch{it});
}

void launch_where(DType compute, const TensorIter& it) {
  DeviceGuard guard(it.device.index);
  ew::visit_where(compute, Launch{it});
}

}  // namespace tg::cuda
