// CUDA kernels of converting copies (into every dtype), fills and where().
#include "ops/elementwise/cuda/elementwise.h"
#include "ops/elementwise/cuda/loops.cuh"
#include "ops/elementwise/elementwise_select.h"
#include "tensor/cuda/device_guard.h"

namespace tg::cuda {

void launch_copy(const TensorIter& it) {
  DeviceGuard guard(it.device.index);
  if (is_floating(it.dtypes[0])) {
    ew::visit_convert<true>(it.dtypes[0], it.dtypes[1], Launch{it});
  } else {
    ew::visit_convert<false>(it.dtypes[0], it.dtypes[1], Launch{it});
  }
}

void launch_where(DType compute, const TensorIter& it) {
  DeviceGuard guard(it.device.index);
  ew::visit_where(compute, Launch{it});
}

void launch_fill(const Scalar& value, const TensorIter& it) {
  DeviceGuard guard(it.device.index);
  ew::visit_fill(it.dtypes[0], value, Launch{it});
}

}  // namespace tg::cuda
