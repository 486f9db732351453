// Collectives as ops: eager calls communicate at once; inside compile() they are graph nodes that
// run (and are captured into CUDA graphs) like any other op. Every rank must issue the same
// collectives in the same order. `group` defaults to the default process group. Each collective
// keeps the CollectiveContext current when it was created, which names it if it stalls.
#pragma once

#include <memory>

#include "distributed/collectives/collective_context.h"
#include "distributed/collectives/collective_wait.h"
#include "distributed/collectives/process_group.h"

namespace tg::distributed {

// The reduction of `t` over all ranks, as a new tensor (differentiable for sum and avg).
Tensor all_reduce(const Tensor& t, ReduceOp op = ReduceOp::Sum, std::shared_ptr<ProcessGroup> group = nullptr);
// Reduces `t` over all ranks in place; returns it.
Tensor& all_reduce_(Tensor& t, ReduceOp op = ReduceOp::Sum, std::shared_ptr<ProcessGroup> group = nullptr);
// Overwrites `t` with rank `root`'s `t`; returns it.
Tensor& broadcast_(Tensor& t, int root = 0, std::shared_ptr<ProcessGroup> group = nullptr);
// The ranks' tensors stacked along a new leading dimension of size world_size (differentiable).
Tensor all_gather(const Tensor& t, std::shared_ptr<ProcessGroup> group = nullptr);
// `t`'s leading dimension (of size world_size) reduced over ranks, rank r keeping block r
// (differentiable for sum and avg).
Tensor reduce_scatter(const Tensor& t, ReduceOp op = ReduceOp::Sum, std::shared_ptr<ProcessGroup> group = nullptr);

// all_gather and reduce_scatter, asynchronous on CUDA: the collective runs on the group's stream while
// the current stream goes on, and its result may be read only through collective_wait()
// (collective_wait.h), which makes the current stream wait for it, in eager mode, in compiled graphs
// and in CUDA graph captures alike. Synchronous on the CPU backend. Their gradients are the other
// collective, asynchronous and waited for. See Note [Asynchronous collectives] in docs/data_parallel.md.
Tensor all_gather_async(const Tensor& t, std::shared_ptr<ProcessGroup> group = nullptr);
// The asynchronous reduce_scatter (see all_gather_async).
Tensor reduce_scatter_async(const Tensor& t, ReduceOp op = ReduceOp::Sum,
                            std::shared_ptr<ProcessGroup> group = nullptr);

// The average over ranks of each of `tensors` (one floating dtype, one device), written into one
// flat buffer by one grouped reduction that reads the tensors in place; returns the buffer (slice i, viewed as tensors[i], is tensor
// i's average). Asynchronous on CUDA: the current stream waits for it at the next join of forked
// work, which graph executors do before their results are read. A data-parallel bucket.
Tensor bucket_average(const TensorList& tensors, std::shared_ptr<ProcessGroup> group = nullptr);

// `flat` (a bucket_average's result) converted to `dtype` once the asynchronous collectives queued so
// far are done: the current stream waits for them first. A bucket reduced in another dtype than its
// gradients (DistributedDataParallelOptions::reduce_dtype) goes back through it.
Tensor bucket_cast(const Tensor& flat, DType dtype);

}  // namespace tg::distributed
