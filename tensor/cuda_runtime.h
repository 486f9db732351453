// The few CUDA runtime services the host-side library needs, without including CUDA headers.
#pragma once

#include <cstdint>
#include <functional>

#include "tensor/device.h"

namespace tg::cuda {

// Copies nbytes between host and device memory (either side may be a CUDA device) on the
// current stream; returns once the copy is complete when it touches host memory. A copy to the
// host throws the first out-of-range index or target a kernel on the source device reported since
// the last such check (kernels record it on the device instead of synchronizing).
void memcpy(void* dst, Device dst_device, const void* src, Device src_device, int64_t nbytes);
// Waits for all work queued on `device`, then throws the first error its kernels reported (as memcpy).
void synchronize(int device_index = 0);
// Makes `device_index` current for this thread.
void set_device(int device_index);
// The device current for this thread.
int current_device();
// Makes the current stream wait for all forked work this thread noted (asynchronous collectives);
// graph executors call it before their results are read and before a capture ends. A no-op when none.
void join_forked_work();
// Milliseconds the device spent between the start and the end of the work `queue` puts on the
// current stream of `device_index` (CUDA events around it; waits for the end).
double device_time_ms(const std::function<void()>& queue, int device_index = 0);

}  // namespace tg::cuda
