// The CUDA runtime services of tensor/cuda_runtime.h and tensor/device.h, the per-thread current
// stream, and the installation of the caching allocator for CUDA storages.
#include "tensor/cuda_runtime.h"

#include "tensor/cuda/caching_allocator.h"
#include "tensor/cuda/cuda_check.h"
#include "tensor/cuda/device_error.h"
#include "tensor/cuda/device_guard.h"
#include "tensor/memory/allocator.h"

namespace tg {
namespace {

// Runs during static initialization, before any CUDA storage can exist. The allocator itself
// touches no CUDA API until the first allocation, so a process without a GPU pays nothing.
[[maybe_unused]] const bool g_allocator_installed = [] {
  set_cuda_allocator(&cuda::CachingAllocator::get());
  return true;
}();

int probe_device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();  // no driver or no device: report none, leave no sticky error behind
    return 0;
  }
  return n;
}

}  // namespace

int cuda_device_count() {
  static const int count = probe_device_count();
  return count;
}

bool cuda_is_available() { return cuda_device_count() > 0; }

namespace cuda {
namespace {
thread_local cudaStream_t t_current_stream = nullptr;  // nullptr: the legacy default stream
}  // namespace

cudaStream_t current_stream() { return t_current_stream; }

void set_current_stream(cudaStream_t stream) { t_current_stream = stream; }

void memcpy(void* dst, Device dst_device, const void* src, Device src_device, int64_t nbytes) {
  if (nbytes == 0) return;
  TG_CHECK(dst_device.is_cuda() || src_device.is_cuda(), "[copy] internal error: a host-to-host copy reached the "
           "CUDA runtime");
  const cudaStream_t stream = current_stream();
  const size_t n = static_cast<size_t>(nbytes);
  if (dst_device.is_cuda() && src_device.is_cuda() && dst_device.index != src_device.index) {
    TG_CUDA_CHECK(cudaMemcpyPeerAsync(dst, dst_device.index, src, src_device.index, n, stream));
  } else {
    TG_CUDA_CHECK(cudaMemcpyAsync(dst, src, n, cudaMemcpyDefault, stream));
  }
  if (dst_device.is_cuda() && src_device.is_cuda()) return;
  // Host memory may be reused or read as soon as we return. A device-to-host copy is also where
  // errors that kernels reported since the last check surface (read on the same stream).
  const DeviceErrorRecord* seen = dst_device.is_cuda() ? nullptr : enqueue_device_error_read(src_device.index, stream);
  TG_CUDA_CHECK(cudaStreamSynchronize(stream));
  raise_device_error(src_device.index, seen);
}

void synchronize(int device_index) {
  DeviceGuard guard(device_index);
  TG_CUDA_CHECK(cudaDeviceSynchronize());
  check_device_error(device_index);
}

double device_time_ms(const std::function<void()>& queue, int device_index) {
  DeviceGuard guard(device_index);
  cudaEvent_t start = nullptr, stop = nullptr;
  TG_CUDA_CHECK(cudaEventCreate(&start));
  TG_CUDA_CHECK(cudaEventCreate(&stop));
  float ms = 0;
  try {
    TG_CUDA_CHECK(cudaEventRecord(start, current_stream()));
    queue();
    TG_CUDA_CHECK(cudaEventRecord(stop, current_stream()));
    TG_CUDA_CHECK(cudaEventSynchronize(stop));
    TG_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
  } catch (...) {
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    throw;
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  check_device_error(device_index);
  return ms;
}

void set_device(int device_index) {
  TG_CHECK(device_index >= 0 && device_index < cuda_device_count(), "[set_device] invalid device index ",
           device_index, ": ", cuda_device_count(), " CUDA device(s) visible");
  TG_CUDA_CHECK(cudaSetDevice(device_index));
}

int current_device() {
  int device = 0;
  TG_CUDA_CHECK(cudaGetDevice(&device));
  return device;
}

}  // namespace cuda
}  // namespace tg
