// Work queued on another stream (an asynchronous collective, or graph nodes run on this thread's
// branch stream) that the current stream has not waited for yet: joined before a capture ends and
// before results are read.
#pragma once

#include <cuda_runtime.h>

#include <functional>

#include "tensor/tensor.h"

namespace tg::cuda {

// Makes `side` wait for everything queued so far on the current stream (the start of forked work).
void fork_to(cudaStream_t side);
// Notes work queued on `side` that the current stream must wait for later; `keep_alive` (buffers
// the work reads or writes) stays referenced until then, so their memory is not reused early.
void note_forked_work(cudaStream_t side, TensorList keep_alive = {});

// This thread's second stream on the current device (non-blocking, created on first use): work that
// does not depend on what the current stream is doing runs there, overlapping it.
cudaStream_t branch_stream();
// True when `stream` is one of this thread's branch streams.
bool is_branch_stream(cudaStream_t stream);
// Runs `work` with the branch stream current, after everything queued so far on the current stream,
// and returns its results; the current stream waits for it at the next join_forked_work(). Until
// then `keep_alive` (what the work reads) and the results stay referenced, and the memory `work`
// frees (its temporaries) is held back, so nothing the branch may still use is handed out again.
TensorList run_on_branch(const std::function<TensorList()>& work, TensorList keep_alive);

}  // namespace tg::cuda
