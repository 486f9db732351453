// The two TCP connections a rank of the CPU backend keeps: one to the next rank of the ring (it only
// sends) and one from the previous rank (it only receives), set up through the rendezvous store,
// and a bounded exchange over them that names the collective and the peer when it stalls.
// See Note [CPU collectives] in docs/data_parallel.md.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "distributed/rendezvous/socket.h"

namespace tg::distributed {

class TcpStore;

// The collective a transfer belongs to, for error messages ("all_reduce #7 (DDP bucket 0 of 2, step 3)").
struct CollectiveTag {
  const char* name = "";
  int64_t sequence = 0;
  std::string context;  // CollectiveContext::describe() of the caller's context; may be empty

  std::string describe() const;
};

// The ring connections of one rank. Not thread-safe: the communicator serializes its calls.
class RingLinks {
 public:
  // Listens on a free port, publishes this rank's address in `store` (`address` when non-empty, else
  // the route toward the master, or TG_SOCKET_IFNAME's address), connects to the next rank and
  // accepts the previous one; both sides check the other's rank and the group's token. Every wait
  // is bounded by `timeout`.
  RingLinks(int rank, int world_size, TcpStore& store, std::chrono::milliseconds timeout, const std::string& master_addr,
            int master_port);

  int rank() const { return rank_; }
  int world_size() const { return world_size_; }
  int next() const { return (rank_ + 1) % world_size_; }
  int prev() const { return (rank_ + world_size_ - 1) % world_size_; }

  // Sends `send_bytes` from `send` to the next rank while receiving `recv_bytes` into `recv` from the
  // previous one (either may be 0). `on_received(total)` runs as bytes arrive, so the caller can
  // consume them early. Throws tg::Error naming `tag` and the peer when no byte moves for the
  // timeout or a peer goes away; the links are then broken and later calls fail at once.
  void exchange(const CollectiveTag& tag, const void* send, size_t send_bytes, void* recv, size_t recv_bytes,
                const std::function<void(size_t)>& on_received = {});

  // Marks the links unusable after a failure found above them (mismatched collectives) and closes
  // them, so the neighbours waiting on this rank fail at once instead of at their timeout.
  void mark_broken(const CollectiveTag& tag);

 private:
  [[noreturn]] void fail(const CollectiveTag& tag, const std::string& what);

  int rank_;
  int world_size_;
  std::chrono::milliseconds timeout_;
  net::Socket to_next_;
  net::Socket from_prev_;
  std::string broken_;  // the collective that failed, when one did
};

}  // namespace tg::distributed
