// Work that a kernel queued on another stream (an asynchronous collective) and that the current
// stream has not waited for yet: joined before a capture ends and before results are read.
#pragma once

#include <cuda_runtime.h>

#include "tensor/tensor.h"

namespace tg::cuda {

// Makes `side` wait for everything queued so far on the current stream (the start of forked work).
void fork_to(cudaStream_t side);
// Notes work queued on `side` that the current stream must wait for later; `keep_alive` (buffers
// the work reads or writes) stays referenced until then, so their memory is not reused early.
void note_forked_work(cudaStream_t side, TensorList keep_alive = {});

}  // namespace tg::cuda
