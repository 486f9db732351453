// Errors found by kernels (an out-of-range index or class target, bad sampling weights) without a host synchronization:
// the kernel records the first one in a per-device record, and the host reads that record at the
// next point where it synchronizes anyway (a device-to-host copy such as item() or cpu(), and
// cuda::synchronize()), raising tg::Error there. The record's address never changes, so kernels
// captured into a CUDA graph report through it on every replay.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace tg::cuda {

// Which op reported an error (0: none).
enum class DeviceErrorOp : int32_t {
  None = 0,
  IndexSelect,
  IndexAdd,
  NllLoss,
  NllLossBackward,
  MultinomialBadWeight,  // a negative, infinite or NaN weight (value: its category, where: its row)
  MultinomialZeroSum,    // a row whose weights sum to zero (where: the row)
  LinearCrossEntropy,    // a class target out of range (value: the target, where: its row)
  LinearCrossEntropyBackward,
};

// The first error a kernel reported on a device since the host last read it.
struct DeviceErrorRecord {
  int32_t op;     // a DeviceErrorOp; the first reporter claims the record by setting it
  int32_t dim;    // the indexed dimension (index ops)
  int64_t value;  // the offending index or target
  int64_t bound;  // valid values are [0, bound)
  int64_t where;  // the batch row of the target (nll_loss)
};

// The device-memory record kernels on `device` report into; allocated and zeroed on first use
// (also while a graph is being captured), never moved or freed.
DeviceErrorRecord* device_error_record(int device);
// Queues a copy of `device`'s record to pinned host memory of this thread on `stream` (to be read
// after the caller's synchronization of `stream`); nullptr when no kernel could have reported yet.
const DeviceErrorRecord* enqueue_device_error_read(int device, cudaStream_t stream);
// Throws the error in `seen` (a record read back from `device`), clearing the device's record.
void raise_device_error(int device, const DeviceErrorRecord* seen);
// Reads `device`'s record once the device is idle and throws what it holds.
void check_device_error(int device);

#ifdef __CUDACC__
// Records an error unless an earlier one is pending (the first reporter wins; later ones return).
__device__ inline void report_device_error(DeviceErrorRecord* record, DeviceErrorOp op, int64_t value, int64_t bound,
                                           int32_t dim, int64_t where) {
  if (atomicCAS(&record->op, 0, -1) != 0) return;
  record->dim = dim;
  record->value = value;
  record->bound = bound;
  record->where = where;
  __threadfence();
  atomicExch(&record->op, static_cast<int32_t>(op));
}
#endif

}  // namespace tg::cuda
