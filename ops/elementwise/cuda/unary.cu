// CUDA launches of unary functions.
#include "ops/elementwise/cuda/elementwise.h"
#include "ops/elementwise/cuda/loops.cuh"
#include "ops/elementwise/elementwise_select.h"
#include "tensor/cuda/device_guard.h"

namespace tg::cuda {

void launch_unary(UnaryKind kind, DType compute, const EwParams& p, const TensorIter& it) {
  DeviceGuard guard(it.device.index);
  ew::visit_unary(kind, compute, p, Launch{it});
}

}  // namespace tg::cuda
