// Error checking and stream access for code that includes the CUDA runtime (.cu and tensor/cuda/ files).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "tensor/check.h"

// Throws tg::Error naming the failed call and CUDA's error string. The thread's last error is
// cleared first (as PyTorch's check does), so a caller that recovers from the throw does not leave a
// stale error for the next launch check to report as its own.
#define TG_CUDA_CHECK(expr)                                                                         \
  do {                                                                                              \
    cudaError_t tg_err_ = (expr);                                                                   \
    if (tg_err_ != cudaSuccess) [[unlikely]] {                                                      \
      (void)cudaGetLastError();                                                                     \
      TG_FAIL("[cuda] ", #expr, " failed: ", cudaGetErrorName(tg_err_), ": ", cudaGetErrorString(tg_err_)); \
    }                                                                                               \
  } while (0)

// Checks the last kernel launch.
#define TG_CUDA_CHECK_LAUNCH() TG_CUDA_CHECK(cudaGetLastError())

namespace tg::cuda {

// The stream every kernel, copy and cuBLAS call on this thread goes to (graph capture swaps it).
cudaStream_t current_stream();
// Makes `stream` current for this thread (nullptr: the default stream).
void set_current_stream(cudaStream_t stream);

// True while the current stream is being captured into a CUDA graph (nothing may synchronize then).
inline bool current_stream_capturing() {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  TG_CUDA_CHECK(cudaStreamIsCapturing(current_stream(), &status));
  return status != cudaStreamCaptureStatusNone;
}

// Makes a stream current for its lifetime, then the one current before.
class StreamGuard {
 public:
  explicit StreamGuard(cudaStream_t stream) : previous_(current_stream()) { set_current_stream(stream); }
  ~StreamGuard() { set_current_stream(previous_); }
  StreamGuard(const StreamGuard&) = delete;
  StreamGuard& operator=(const StreamGuard&) = delete;

 private:
  cudaStream_t previous_;
};

// Blocks of `threads` threads needed to cover n elements (at least 1).
inline unsigned blocks_for(int64_t n, int threads) {
  const int64_t b = (n + threads - 1) / threads;
  return static_cast<unsigned>(b < 1 ? 1 : b);
}

}  // namespace tg::cuda
