// The names Gloo gives one rank's peers in its error messages, and the rank each name stands for.
// Gloo names a failed connection by the address its pair holds for the remote end. That is the
// remote end of the socket, except where the peer dialled in before this rank connected the pair:
// then Gloo keeps the address the peer listened on (the one the rendezvous gave). So each peer is
// known by both. See Note [CPU collectives] in docs/data_parallel.md.
#pragma once

#include <string>
#include <vector>

namespace gloo {
class Context;
}  // namespace gloo

namespace tg::distributed {

class TcpStore;

// Addresses ("[10.0.0.2]:41234") by peer rank; a rank has no names for itself.
class PeerAddresses {
 public:
  // No names yet, for a group of `world_size` ranks.
  explicit PeerAddresses(int world_size);

  // Every peer's names for the connections of `context` (this rank's, connected by Gloo's
  // connectFullMesh through `store` under `prefix`): each rank publishes its own end of every
  // connection under prefix + "ends/<rank>" and reads the others'; the addresses the peers listened
  // on are in the records Gloo's rendezvous left under prefix + "<rank>".
  static PeerAddresses learn(TcpStore& store, const std::string& prefix, gloo::Context& context);

  // Records `address` as a name of rank `peer`.
  void add(int peer, const std::string& address);

  // The rank whose name `message` contains (not as the start of a longer port number), or -1.
  int find(const std::string& message) const;

 private:
  std::vector<std::vector<std::string>> names_;
};

}  // namespace tg::distributed
