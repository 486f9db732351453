// CUDA launches of binary arithmetic and the fused gradient kernels.
#include "ops/elementwise/cuda/elementwise.h"
#include "ops/elementwise/cuda/loops.cuh"
#include "ops/elementwise/elementwise_select.h"
#include "tensor/cuda/device_guard.h"

namespace tg::cuda {

void launch_binary(BinaryKind kind, DType compute, const EwParams& p, const TensorIter& it) {
  DeviceGuard guard(it.device.index);
  ew::visit_binary(kind, compute, p, Launch{it});
}

}  // namespace tg::cuda
