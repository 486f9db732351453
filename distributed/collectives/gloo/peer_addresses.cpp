// See Note [CPU collectives] in docs/data_parallel.md.
#include "distributed/collectives/gloo/peer_addresses.h"

#include <gloo/context.h>
#include <gloo/transport/tcp/address.h>

#include <cctype>

#include "distributed/rendezvous/socket.h"
#include "distributed/rendezvous/store.h"
#include "tensor/check.h"

namespace tg::distributed {
namespace {

// The address rank `peer` listened on for its pair with `rank`, from the record Gloo's rendezvous
// keeps for `peer`: the addresses of its pairs with every other rank, in rank order, all one size.
std::string listened_on(const std::string& record, int peer, int rank, int world_size) {
  const size_t others = static_cast<size_t>(world_size - 1);
  const size_t each = gloo::transport::tcp::Address().bytes().size();
  TG_CHECK(record.size() == others * each, "[distributed] rank ", rank, " read a Gloo rendezvous record of ",
           record.size(), " bytes for rank ", peer, ": expected ", others, " TCP addresses of ", each, " bytes");
  const size_t index = static_cast<size_t>(rank > peer ? rank - 1 : rank);
  const auto first = record.begin() + static_cast<std::ptrdiff_t>(index * each);
  return gloo::transport::tcp::Address(std::vector<char>(first, first + static_cast<std::ptrdiff_t>(each))).str();
}

}  // namespace

PeerAddresses::PeerAddresses(int world_size) : names_(static_cast<size_t>(world_size)) {}

PeerAddresses PeerAddresses::learn(TcpStore& store, const std::string& prefix, gloo::Context& context) {
  const int rank = context.rank, world_size = context.size;
  PeerAddresses names(world_size);
  std::string mine;
  for (int p = 0; p < world_size; ++p)
    net::put_bytes(mine, p == rank ? std::string() : context.getPair(p)->address().str());
  store.set(prefix + "ends/" + std::to_string(rank), mine);
  for (int p = 0; p < world_size; ++p) {
    if (p == rank) continue;
    const std::string theirs = store.get(prefix + "ends/" + std::to_string(p));
    net::Reader r(theirs);
    std::string end;
    for (int q = 0; q <= rank; ++q) end = r.bytes();
    TG_CHECK(r.ok(), "[distributed] rank ", rank, " read a malformed list of addresses of rank ", p,
             " from the store: expected one per rank");
    names.add(p, end);
    names.add(p, listened_on(store.get(prefix + std::to_string(p)), p, rank, world_size));
  }
  return names;
}

void PeerAddresses::add(int peer, const std::string& address) {
  TG_CHECK(peer >= 0 && peer < static_cast<int>(names_.size()), "[distributed] address '", address, "' for rank ",
           peer, ": expected a rank in [0, ", names_.size(), ")");
  if (!address.empty()) names_[static_cast<size_t>(peer)].push_back(address);
}

int PeerAddresses::find(const std::string& message) const {
  for (size_t p = 0; p < names_.size(); ++p) {
    for (const std::string& address : names_[p]) {
      for (size_t at = message.find(address); at != std::string::npos; at = message.find(address, at + 1)) {
        const size_t end = at + address.size();
        if (end == message.size() || !std::isdigit(static_cast<unsigned char>(message[end])))
          return static_cast<int>(p);  // not a longer port
      }
    }
  }
  return -1;
}

}  // namespace tg::distributed
