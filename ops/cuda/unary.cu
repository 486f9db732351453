// CUDA launches of unary functions.
#include "ops/cuda/elementwise.h"
#include "ops/cuda/loops.cuh"
#include "ops/elementwise_select.h"
#include "tensor/cuda/device_guard.h"

namespace tg::cuda {

void launch_unary(UnaryKind kind, DType compute, const EwParams& p, const TensorIter& it) {
  DeviceGuard guard(it.device.index);
  ew::visit_unary(kind, compute, p, Launch{it});
}

}  // namespace tg::cuda
