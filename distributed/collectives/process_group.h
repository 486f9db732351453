// Process groups: the processes that train together, their ranks, and the transport between them
// (NCCL on CUDA devices, or Gloo on CPU tensors).
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "distributed/rendezvous/environment.h"
#include "tensor/tensor.h"

namespace tg::distributed {

// How a collective combines the tensors of all ranks.
enum class ReduceOp { Sum, Avg, Max };

// "sum", "avg" or "max".
const char* reduce_op_name(ReduceOp op);

// Options of init().
struct InitOptions {
  // Bounds the rendezvous, the communicator's creation, every eager collective and every replay of
  // a CUDA graph holding collectives: past it what stalled is named (the collective and its context,
  // or the replayed graph) instead of hanging on a dead peer; the CPU backend throws, NCCL's watchdog
  // aborts the communicator and exits the process.
  std::chrono::milliseconds timeout = std::chrono::minutes(5);
  // The transport: "nccl" (one CUDA device per process), "cpu" (aliases "gloo" and "tcp": Gloo's
  // collectives over TCP on CPU tensors, on one host or several, even where CUDA devices exist) or
  // "auto" (NCCL when this machine has CUDA devices, else the CPU backend).
  std::string backend = "auto";
};

class TcpStore;
class Communicator;

// The processes of one training job: rank, world size, this process's device and the transport.
class ProcessGroup {
 public:
  // Joins the group `env` describes (rendezvous through rank 0's store, then the communicator).
  ProcessGroup(const Environment& env, const InitOptions& options);
  ~ProcessGroup();
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  int rank() const { return env_.rank; }
  int world_size() const { return env_.world_size; }
  int local_rank() const { return env_.local_rank; }
  // cuda:LOCAL_RANK with the NCCL backend, the CPU with the CPU backend.
  Device device() const { return device_; }
  // "nccl" or "cpu" (what "auto" resolved to).
  const std::string& backend() const { return backend_; }
  // The rendezvous store (null for a group of one process).
  TcpStore* store() const { return store_.get(); }

  // The collectives, on tensors of this group's device (or the CPU for a group of one). `out` may be
  // `in`. Asynchronous ones (NCCL; the CPU backend's are synchronous) are queued on the group's own
  // stream and joined by the current stream at the next join of forked work (graph executors join
  // before their results are read); an asynchronous all_gather's or reduce_scatter's `out` is also
  // joined, alone, by wait_for_collective(out) or collective_wait(out) (collective_wait.h).
  void all_reduce(const Tensor& in, const Tensor& out, ReduceOp op, bool async = false);
  // Reduces each of `ins` (contiguous, one dtype) into its slice of `flat` (their sizes laid end to
  // end) with one grouped launch and no packing copies: a data-parallel bucket.
  void all_reduce_into(const TensorList& ins, const Tensor& flat, ReduceOp op, bool async = false);
  void broadcast(const Tensor& in, const Tensor& out, int root);
  // out holds world_size blocks of in's size, rank r's in block r.
  void all_gather(const Tensor& in, const Tensor& out, bool async = false);
  // in holds world_size blocks of out's size; rank r receives the reduction of block r.
  void reduce_scatter(const Tensor& in, const Tensor& out, ReduceOp op, bool async = false);
  // Blocks until every rank has arrived (through the store; a no-op for a group of one).
  void barrier(const std::string& name);

 private:
  void check_operands(const char* what, const Tensor& in, const Tensor& out) const;
  Communicator& transport(const Tensor& t) const;

  Environment env_;
  InitOptions options_;
  std::string backend_;
  Device device_;
  std::unique_ptr<TcpStore> store_;
  std::unique_ptr<Communicator> comm_;
  int64_t barriers_ = 0;
};

// Joins the default group from the environment (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR,
// MASTER_PORT, as tgrun and torchrun set them; a single process when they are absent) and, with the
// NCCL backend, makes cuda:LOCAL_RANK this thread's device. Throws when already initialized.
void init(const InitOptions& options = {});
// Joins the default group described by `env` (tests and custom launchers). Several ranks of one
// job may also live in one process as threads, each constructing its own ProcessGroup (not the
// default one) from an Environment with its rank and a shared free master_port.
void init(const Environment& env, const InitOptions& options = {});
// True between init() and destroy().
bool is_initialized();
// The default group; throws when init() has not been called.
std::shared_ptr<ProcessGroup> default_group();
// Leaves the default group (its communicator is destroyed once no op holds it).
void destroy();
// The default group's rank and world size (0 and 1 before init()).
int rank();
int world_size();

}  // namespace tg::distributed
