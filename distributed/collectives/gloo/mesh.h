// The Gloo side of a CPU process group: a TCP device on the interface this host publishes, a Gloo
// context whose pairs connect every rank to every other through the rendezvous store, the
// exchange of small messages with every peer, and the translation of what Gloo throws into a
// tg::Error naming this rank, the collective and, where it can be told, the peer.
// See Note [CPU collectives] in docs/data_parallel.md.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "distributed/collectives/gloo/peer_addresses.h"

namespace gloo {
class Context;
namespace transport {
class Device;
}  // namespace transport
}  // namespace gloo

namespace tg::distributed {

class TcpStore;

// The collective a failure belongs to, for error messages: "all_reduce #7 (DDP bucket 0 of 2, step 3)".
struct CollectiveTag {
  const char* name = "";
  int64_t sequence = 0;
  std::string context;  // CollectiveContext::describe() of the caller's context; may be empty

  std::string describe() const;
};

// The connections of one rank of a CPU process group. Not thread-safe: the communicator serializes
// its calls. After a failure the mesh is broken (its connections closed, so peers waiting on this
// rank fail at once) and every later call throws naming the collective that failed.
class GlooMesh {
 public:
  // Opens a TCP device on this host's address (TG_SOCKET_ADDR, else the address of interface
  // TG_SOCKET_IFNAME, else the local address of the route toward master_addr:master_port) and
  // connects to every other rank, meeting them through `store`. Bounded by `timeout`.
  GlooMesh(int rank, int world_size, TcpStore& store, std::chrono::milliseconds timeout, const std::string& master_addr,
           int master_port);
  ~GlooMesh();
  GlooMesh(const GlooMesh&) = delete;
  GlooMesh& operator=(const GlooMesh&) = delete;

  int rank() const { return rank_; }
  int world_size() const { return world_size_; }
  // The context Gloo's collectives run on.
  const std::shared_ptr<gloo::Context>& context() const { return context_; }

  // Sends `mine` to every other rank and returns every rank's message (the same size on all),
  // indexed by rank. Past the timeout the error names the ranks whose message never came.
  std::vector<std::string> exchange(const CollectiveTag& tag, const std::string& mine);

  // Runs `gloo_calls` (one collective's calls into Gloo) and rethrows what Gloo throws as a
  // tg::Error naming this rank, `tag` and the lost peer when Gloo's message tells which it was.
  void run(const CollectiveTag& tag, const std::function<void()>& gloo_calls);

  // Breaks the mesh after a failure found above it (ranks that issued different collectives).
  void mark_broken(const CollectiveTag& tag);

 private:
  void check_usable(const CollectiveTag& tag) const;
  // After Gloo's timeout: the first peer whose connection failed on its own, with Gloo's message (or -1).
  std::pair<int, std::string> first_failed_peer() const;
  [[noreturn]] void fail(const CollectiveTag& tag, const std::string& what);
  // Fails with what Gloo's `message` means: a lost peer, a timeout (naming the peer that failed
  // first, else `waiting_for` when not -1: the rank whose message never came) or another error.
  [[noreturn]] void fail_from_gloo(const CollectiveTag& tag, const std::string& message, bool timed_out,
                                   int waiting_for);

  int rank_;
  int world_size_;
  std::chrono::milliseconds timeout_;
  std::shared_ptr<gloo::transport::Device> device_;
  std::shared_ptr<gloo::Context> context_;
  // What Gloo's messages call each peer: Gloo names a pair's remote end by address.
  PeerAddresses peer_addresses_;
  std::string broken_;  // the collective that failed, when one did
};

}  // namespace tg::distributed
