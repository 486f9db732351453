// The explicit wait of an asynchronous collective (all_gather_async, reduce_scatter_async): what
// makes reading its result safe, eagerly, as a node of a compiled graph and inside a CUDA graph
// capture. See Note [Asynchronous collectives] in docs/data_parallel.md.
#pragma once

#include "tensor/tensor.h"

namespace tg::distributed {

// `t`, the result of an asynchronous collective as that call returned it, once the collective is
// done: the current stream waits for it first (a no-op on the CPU backend, where collectives are
// synchronous). A view of `t` with its gradient; read the result only through it.
Tensor collective_wait(const Tensor& t);

// The same wait without an op, for eager code that reads an asynchronous collective's output in
// place (fully_shard's prefetched gathers): a no-op when nothing is pending for `t`'s memory.
void wait_for_collective(const Tensor& t);

}  // namespace tg::distributed
