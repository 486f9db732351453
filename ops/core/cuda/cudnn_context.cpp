#include "ops/core/cuda/cudnn_context.h"

#include <memory>
#include <mutex>
#include <vector>

#include "tensor/cuda/cuda_check.h"
#include "tensor/cuda/device_guard.h"

namespace tg::cuda {
namespace {

struct CudnnSlot {
  cudnnHandle_t handle = nullptr;
  cudaStream_t stream = nullptr;
  bool bound = false;
};

std::mutex g_mutex;
std::vector<std::unique_ptr<CudnnSlot>> g_slots;  // by device index; handles live for the process

}  // namespace

cudnnHandle_t cudnn_handle(int device) {
  TG_CHECK(device >= 0, "[cudnn] invalid device index ", device);
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_slots.size() <= static_cast<size_t>(device)) g_slots.resize(static_cast<size_t>(device) + 1);
  auto& entry = g_slots[static_cast<size_t>(device)];
  if (!entry) entry = std::make_unique<CudnnSlot>();
  CudnnSlot& s = *entry;
  if (s.handle == nullptr) {
    DeviceGuard guard(device);
    TG_CUDNN_CHECK(cudnnCreate(&s.handle));
  }
  const cudaStream_t stream = current_stream();
  if (!s.bound || s.stream != stream) {
    TG_CUDNN_CHECK(cudnnSetStream(s.handle, stream));
    s.stream = stream;
    s.bound = true;
  }
  return s.handle;
}

}  // namespace tg::cuda
