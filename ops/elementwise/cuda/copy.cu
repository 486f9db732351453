// CUDA kernels of converting copies into floating dtypes, and the copy launcher.
#include "ops/elementwise/cuda/elementwise.h"
#include "ops/elementwise/cuda/loops.cuh"
#include "ops/elementwise/elementwise_select.h"
#include "tensor/cuda/device_guard.h"

namespace tg::cuda {

void launch_copy(const TensorIter& it) {
  if (!is_floating(it.dtypes[0])) return launch_copy_into_exact(it);
  DeviceGuard guard(it.device.index);
  ew::visit_convert<true>(it.dtypes[0], it.dtypes[1], Launch{it});
}

}  // namespace tg::cuda
