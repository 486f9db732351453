// The results of asynchronous collectives that no wait has joined yet: per thread, each with an
// event after its collective and the tensors it uses. collective_wait() joins one of them. See
// Note [Asynchronous collectives] in docs/data_parallel.md.
#pragma once

#include <cuda_runtime.h>

#include "tensor/tensor.h"

namespace tg::distributed {

// Notes that the collective just queued on `stream` writes `result`; `operands` (what it reads and
// writes) stay referenced until a wait joins it, so their memory is not handed out again before.
void note_async_result(cudaStream_t stream, const Tensor& result, TensorList operands);

// Makes the current stream wait for the pending collective that writes `t`'s memory and forgets it.
// Nothing happens when none is pending on this thread, or when it was queued in another capture
// than the current one (or outside captures while one runs): the end of a capture, and the runs of
// graph executors before one begins, join every collective they forked.
void wait_async_result(const Tensor& t);

}  // namespace tg::distributed
