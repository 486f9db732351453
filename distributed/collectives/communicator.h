// The transport behind a process group: moves and reduces tensor data between ranks.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "distributed/collectives/process_group.h"

namespace tg::distributed {

// One implementation per transport; the process group validates operands before calling it.
class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual void all_reduce(const Tensor& in, const Tensor& out, ReduceOp op, bool async) = 0;
  // Reduces each of `ins` into its slice of `flat` (laid end to end), as one grouped launch.
  virtual void all_reduce_into(const TensorList& ins, const Tensor& flat, ReduceOp op, bool async) = 0;
  virtual void broadcast(const Tensor& in, const Tensor& out, int root) = 0;
  virtual void all_gather(const Tensor& in, const Tensor& out, bool async) = 0;
  virtual void reduce_scatter(const Tensor& in, const Tensor& out, ReduceOp op, bool async) = 0;
};

// A group of one process: every collective is a copy (the reduction of one tensor is itself).
class SelfCommunicator final : public Communicator {
 public:
  void all_reduce(const Tensor& in, const Tensor& out, ReduceOp op, bool async) override;
  void all_reduce_into(const TensorList& ins, const Tensor& flat, ReduceOp op, bool async) override;
  void broadcast(const Tensor& in, const Tensor& out, int root) override;
  void all_gather(const Tensor& in, const Tensor& out, bool async) override;
  void reduce_scatter(const Tensor& in, const Tensor& out, ReduceOp op, bool async) override;
};

// Gloo's collectives between the processes of a group of several ranks, on CPU tensors (the CPU
// backend): a Gloo context whose pairs connect every rank to every other, met through `store`.
// Setup and every collective are bounded by `timeout`: past it a tg::Error names this rank, the
// collective, its sequence number and the peer rank waited for. This host's address is
// TG_SOCKET_ADDR, else that of interface TG_SOCKET_IFNAME, else the route toward master_addr:master_port.
std::unique_ptr<Communicator> make_gloo_communicator(int rank, int world_size, TcpStore& store,
                                                     std::chrono::milliseconds timeout, const std::string& master_addr,
                                                     int master_port);

#ifdef TG_WITH_CUDA
// NCCL over the CUDA devices of all ranks. Rank 0 makes the unique id and publishes it through
// `store` (null for a group of one); creation, eager collectives and the replays of CUDA graphs
// holding its collectives are bounded by `timeout` (a watchdog names what stalled and exits).
std::unique_ptr<Communicator> make_nccl_communicator(int rank, int world_size, int device, TcpStore* store,
                                                     std::chrono::milliseconds timeout);
#endif

}  // namespace tg::distributed
