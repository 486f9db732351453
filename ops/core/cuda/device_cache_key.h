// The part of an on-disk cache key (ops/core/disk_cache.h) that names the device and the CUDA stack.
#pragma once

#include <string>

namespace tg::cuda {

// "device <name> sm_<major><minor> <SMs> SMs, CUDA runtime <v>, driver <v>": what every cached
// artifact of `device` depends on besides its library's own version. Computed once per device.
std::string device_cache_key(int device);

}  // namespace tg::cuda
