// Makes a CUDA device current for a scope (kernels and cuBLAS calls run on the current device).
#pragma once

#include "tensor/cuda/cuda_check.h"

namespace tg::cuda {

// Switches to `device` when it is not already current, and back on destruction.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) : device_(device) {
    TG_CUDA_CHECK(cudaGetDevice(&previous_));
    if (previous_ != device_) TG_CUDA_CHECK(cudaSetDevice(device_));
  }
  ~DeviceGuard() {
    if (previous_ != device_) (void)cudaSetDevice(previous_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int device_;
  int previous_ = 0;
};

}  // namespace tg::cuda
