// NCCL behind a process group: the communicator, its stream, and a watchdog (nccl_watchdog.h) that
// turns a stalled collective (a dead or hung peer) into an error message and an exit instead of a
// hang. See Note [Data-parallel internals] and Note [Named hangs] in docs/data_parallel.md.
#include <nccl.h>

#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>

#include "distributed/collectives/collective_context.h"
#include "distributed/collectives/communicator.h"
#include "distributed/collectives/cuda/async_results.h"
#include "distributed/collectives/cuda/nccl_watchdog.h"
#include "distributed/rendezvous/store.h"
#include "tensor/cuda/cuda_check.h"
#include "tensor/cuda/device_guard.h"
#include "tensor/cuda/forked_work.h"
#include "tensor/cuda_runtime.h"

namespace tg::distributed {
namespace {

#define TG_NCCL_CHECK(expr)                                                                  \
  do {                                                                                       \
    ncclResult_t tg_nccl_ = (expr);                                                          \
    if (tg_nccl_ != ncclSuccess) [[unlikely]] {                                              \
      TG_FAIL("[distributed] ", #expr, " failed: ", ncclGetErrorString(tg_nccl_), " (",      \
              ncclGetLastError(nullptr), ")");                                               \
    }                                                                                        \
  } while (0)

ncclDataType_t nccl_dtype(DType t) {
  switch (t) {
    case DType::Float32: return ncclFloat32;
    case DType::Float64: return ncclFloat64;
    case DType::Float16: return ncclFloat16;
    case DType::BFloat16: return ncclBfloat16;
    case DType::Int32: return ncclInt32;
    case DType::Int64: return ncclInt64;
    case DType::Bool: return ncclUint8;
  }
  TG_FAIL("[distributed] unsupported dtype");
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return ncclSum;
    case ReduceOp::Avg: return ncclAvg;
    case ReduceOp::Max: return ncclMax;
  }
  TG_FAIL("[distributed] unknown reduce op");
}

bool capturing(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  TG_CUDA_CHECK(cudaStreamIsCapturing(stream, &status));
  return status != cudaStreamCaptureStatusNone;
}

// Bounds a blocking step (communicator creation) that has no event to watch.
class Deadline {
 public:
  Deadline(int rank, std::chrono::milliseconds timeout, std::string what)
      : thread_([this, rank, timeout, what = std::move(what)] {
          std::unique_lock<std::mutex> lock(mutex_);
          if (!done_cv_.wait_for(lock, timeout, [this] { return done_; })) {
            std::fprintf(stderr, "[distributed] rank %d: %s did not complete within %.1f s (a peer rank is missing "
                         "or died); exiting\n", rank, what.c_str(), timeout.count() / 1000.0);
            std::fflush(stderr);
            std::_Exit(1);
          }
        }) {}
  ~Deadline() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      done_ = true;
    }
    done_cv_.notify_all();
    thread_.join();
  }

 private:
  std::mutex mutex_;
  std::condition_variable done_cv_;
  bool done_ = false;
  std::thread thread_;
};

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(int rank, int world_size, int device, TcpStore* store, std::chrono::milliseconds timeout)
      : device_(device), watchdog_(std::make_shared<NcclWatchdog>(rank, device, timeout)) {
    cuda::DeviceGuard on_device(device_);
    ncclUniqueId id;
    const std::string key = "tg/nccl_unique_id";
    if (rank == 0) {
      TG_NCCL_CHECK(ncclGetUniqueId(&id));
      if (store) store->set(key, std::string(reinterpret_cast<const char*>(&id), sizeof(id)));
    } else {
      TG_CHECK(store, "[distributed] rank ", rank, " of ", world_size, " needs a rendezvous store");
      const std::string bytes = store->get(key);
      TG_CHECK(bytes.size() == sizeof(id), "[distributed] the NCCL id from rank 0 has ", bytes.size(),
               " bytes, expected ", sizeof(id));
      std::memcpy(&id, bytes.data(), sizeof(id));
    }
    TG_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    {
      Deadline bounded(rank, timeout, "creating the NCCL communicator");
      TG_NCCL_CHECK(ncclCommInitRank(&comm_, world_size, id, rank));
    }
    watchdog_->start(comm_);
  }

  ~NcclCommunicator() override {
    watchdog_->stop();
    cuda::DeviceGuard on_device(device_);
    cudaStreamSynchronize(stream_);
    ncclCommDestroy(comm_);
    cudaStreamDestroy(stream_);
  }

  void all_reduce(const Tensor& in, const Tensor& out, ReduceOp op, bool async) override {
    run("all_reduce", {in, out}, async, [&] {
      return ncclAllReduce(in.impl()->data(), out.impl()->data(), static_cast<size_t>(in.numel()),
                           nccl_dtype(in.dtype()), nccl_op(op), comm_, stream_);
    });
  }
  void all_reduce_into(const TensorList& ins, const Tensor& flat, ReduceOp op, bool async) override {
    TensorList operands = ins;
    operands.push_back(flat);
    run("all_reduce_into", std::move(operands), async, [&] {
      ncclResult_t status = ncclGroupStart();
      auto* out = static_cast<char*>(flat.impl()->data());
      for (const Tensor& t : ins) {
        if (status != ncclSuccess) break;
        if (t.numel() == 0) continue;
        status = ncclAllReduce(t.impl()->data(), out, static_cast<size_t>(t.numel()), nccl_dtype(t.dtype()), nccl_op(op),
                               comm_, stream_);
        out += t.numel() * t.element_size();
      }
      const ncclResult_t ended = ncclGroupEnd();
      return status != ncclSuccess ? status : ended;
    });
  }
  void broadcast(const Tensor& in, const Tensor& out, int root) override {
    run("broadcast", {in, out}, false, [&] {
      return ncclBroadcast(in.impl()->data(), out.impl()->data(), static_cast<size_t>(in.numel()),
                           nccl_dtype(in.dtype()), root, comm_, stream_);
    });
  }
  void all_gather(const Tensor& in, const Tensor& out, bool async) override {
    run("all_gather", {in, out}, async, [&] {
      return ncclAllGather(in.impl()->data(), out.impl()->data(), static_cast<size_t>(in.numel()),
                           nccl_dtype(in.dtype()), comm_, stream_);
    }, &out);
  }
  void reduce_scatter(const Tensor& in, const Tensor& out, ReduceOp op, bool async) override {
    run("reduce_scatter", {in, out}, async, [&] {
      return ncclReduceScatter(in.impl()->data(), out.impl()->data(), static_cast<size_t>(out.numel()),
                               nccl_dtype(in.dtype()), nccl_op(op), comm_, stream_);
    }, &out);
  }

 private:
  // Queues one NCCL call on the group's stream after the current stream's work; the current stream
  // waits for it at the next join (right away unless `async`). An asynchronous call that names its
  // `result` is also joined by the first wait for that result, which releases the operands.
  template <typename Call>
  void run(const char* what, TensorList operands, bool async, const Call& call, const Tensor* result = nullptr) {
    cuda::DeviceGuard on_device(device_);
    cuda::fork_to(stream_);
    TG_NCCL_CHECK(call());
    // Inside a capture nothing runs yet: the graph's executor tells the watchdog of each replay.
    if (capturing(stream_))
      note_captured_work(watchdog_, std::make_shared<CapturedCollective>(what, current_collective_context()));
    else
      watchdog_->watch(what, current_collective_context().describe(), stream_);
    if (async && result) {
      cuda::note_forked_work(stream_);  // joined at the latest where forked work is
      note_async_result(stream_, *result, std::move(operands));
      return;
    }
    cuda::note_forked_work(stream_, std::move(operands));
    if (!async) cuda::join_forked_work();
  }

  int device_;
  cudaStream_t stream_ = nullptr;
  ncclComm_t comm_ = nullptr;
  std::shared_ptr<NcclWatchdog> watchdog_;
};

}  // namespace

std::unique_ptr<Communicator> make_nccl_communicator(int rank, int world_size, int device, TcpStore* store,
                                                     std::chrono::milliseconds timeout) {
  return std::make_unique<NcclCommunicator>(rank, world_size, device, store, timeout);
}

}  // namespace tg::distributed
