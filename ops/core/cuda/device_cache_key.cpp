// See Note [Warm start] in docs/warm_start.md.
#include "ops/core/cuda/device_cache_key.h"

#include <map>
#include <mutex>

#include "tensor/cuda/cuda_check.h"

namespace tg::cuda {

std::string device_cache_key(int device) {
  static std::mutex mutex;
  static std::map<int, std::string>* keys = new std::map<int, std::string>;  // never destroyed
  std::lock_guard<std::mutex> lock(mutex);
  auto it = keys->find(device);
  if (it != keys->end()) return it->second;
  cudaDeviceProp prop{};
  TG_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  int runtime = 0, driver = 0;
  TG_CUDA_CHECK(cudaRuntimeGetVersion(&runtime));
  TG_CUDA_CHECK(cudaDriverGetVersion(&driver));
  // The SM count tells a MIG slice or a cut-down part from the full chip of the same name.
  std::string key = "device " + std::string(prop.name) + " sm_" + std::to_string(prop.major) +
                    std::to_string(prop.minor) + " " + std::to_string(prop.multiProcessorCount) + " SMs, CUDA runtime " +
                    std::to_string(runtime) + ", driver " + std::to_string(driver);
  return keys->emplace(device, std::move(key)).first->second;
}

}  // namespace tg::cuda
