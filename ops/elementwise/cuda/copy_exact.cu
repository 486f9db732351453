// CUDA kernels of converting copies into bool and the integer dtypes.
#include "ops/elementwise/cuda/elementwise.h"
#include "ops/elementwise/cuda/loops.cuh"
#include "ops/elementwise/elementwise_select.h"
#include "tensor/cuda/device_guard.h"

namespace tg::cuda {

void launch_copy_into_exact(const TensorIter& it) {
  DeviceGuard guard(it.device.index);
  ew::visit_convert<false>(it.dtypes[0], it.dtypes[1], Launch{it});
}

}  // namespace tg::cuda
