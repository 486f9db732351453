// cuDNN access for the CUDA back end: one handle per device, bound to the thread's current stream.
#pragma once

#include <cudnn.h>

#include "tensor/check.h"

// Throws tg::Error naming the failed cuDNN call and its status.
#define TG_CUDNN_CHECK(expr)                                                                       \
  do {                                                                                             \
    cudnnStatus_t tg_status_ = (expr);                                                             \
    if (tg_status_ != CUDNN_STATUS_SUCCESS) [[unlikely]] {                                         \
      TG_FAIL("[cudnn] ", #expr, " failed: ", cudnnGetErrorString(tg_status_));                    \
    }                                                                                              \
  } while (0)

namespace tg::cuda {

// The cuDNN handle of `device`, created on first use and bound to this thread's current stream
// (so that calls made during a CUDA graph capture are captured). Not for two threads at once.
cudnnHandle_t cudnn_handle(int device);

}  // namespace tg::cuda
