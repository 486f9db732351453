// See Note [CPU collectives] in docs/data_parallel.md.
#include "distributed/collectives/gloo/mesh.h"

#include <gloo/rendezvous/context.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/transport/unbound_buffer.h>
#include <gloo/types.h>

#include <algorithm>
#include <cstdlib>

#include "distributed/collectives/collective_context.h"
#include "distributed/collectives/gloo/sigpipe_block.h"
#include "distributed/collectives/gloo/store_adapter.h"
#include "distributed/rendezvous/socket.h"
#include "distributed/rendezvous/store.h"
#include "tensor/check.h"

namespace tg::distributed {
namespace {

using Clock = std::chrono::steady_clock;

// exchange()'s messages travel in slots of their own, apart from those of Gloo's collectives
// (whose prefixes are 0x01 to 0x08).
constexpr uint8_t kExchangeSlotPrefix = 0x54;

// Where Gloo's rendezvous keys, and the peers' addresses, live in the job's store.
const char* const kKeyPrefix = "tg/gloo/";

// The time left until `deadline`, rounded up: a wait that long ends at or after the deadline, so a
// wait that ran out is told apart from an error by the clock (at least 1 ms, for Gloo's waits).
std::chrono::milliseconds left_until(Clock::time_point deadline) {
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
  return std::max(left, std::chrono::milliseconds(1));
}

// The address this rank's Gloo device listens on and publishes.
std::string host_address(const std::string& master_addr, int master_port) {
  if (const char* addr = std::getenv("TG_SOCKET_ADDR"); addr != nullptr && *addr != '\0') return addr;
  const char* ifname = std::getenv("TG_SOCKET_IFNAME");
  return net::advertised_address(master_addr, master_port, ifname != nullptr ? ifname : "");
}

// What a failure that Gloo reports on the connection to `peer` says.
std::string lost_peer(int peer, const std::string& gloo_message) {
  return "lost rank " + std::to_string(peer) + " (Gloo: " + gloo_message + "): it exited, crashed or failed a "
         "collective of its own and closed its connections (see its output for why)";
}

}  // namespace

std::string CollectiveTag::describe() const { return describe_collective(name, sequence, context); }

GlooMesh::GlooMesh(int rank, int world_size, TcpStore& store, std::chrono::milliseconds timeout,
                   const std::string& master_addr, int master_port)
    : rank_(rank), world_size_(world_size), timeout_(timeout), peer_addresses_(world_size) {
  const SigpipeBlock no_sigpipe;  // also for the event loop thread the device starts
  const std::string host = host_address(master_addr, master_port);
  gloo::transport::tcp::attr attr;
  attr.hostname = host;
  try {
    device_ = gloo::transport::tcp::CreateDevice(attr);
  } catch (const std::exception& e) {
    TG_FAIL("[distributed] rank ", rank, " could not open a Gloo TCP device on '", host, "' (", e.what(),
            "): expected an address of this host (TG_SOCKET_ADDR names one, TG_SOCKET_IFNAME an interface)");
  }
  auto context = std::make_shared<gloo::rendezvous::Context>(rank, world_size);
  context->setTimeout(timeout);
  GlooStoreAdapter keys(store, kKeyPrefix);
  try {
    context->connectFullMesh(keys, device_);
  } catch (const Error&) {
    throw;  // the store's own message: the key (the rank) that never came
  } catch (const std::exception& e) {
    TG_FAIL("[distributed] rank ", rank, " could not connect to the other ranks from ", host, " within ",
            net::format_duration(timeout), " (", e.what(), "): expected every host to reach the others on any TCP "
            "port (a firewall? TG_SOCKET_IFNAME or TG_SOCKET_ADDR picks the network the hosts share)");
  }
  peer_addresses_ = PeerAddresses::learn(store, kKeyPrefix, *context);
  context_ = std::move(context);
}

GlooMesh::~GlooMesh() = default;

std::pair<int, std::string> GlooMesh::first_failed_peer() const {
  // Gloo's timeout has put every connection into an error state, so a send fails at once with the
  // connection's error: that of a connection that failed earlier is its own and names its peer.
  // (Were one still healthy, the empty send would go nowhere: the mesh is broken right after.)
  auto probe = context_->createUnboundBuffer(nullptr, 0);
  for (int p = 0; p < world_size_; ++p) {
    if (p == rank_) continue;
    try {
      context_->getPair(p)->send(probe.get(), gloo::Slot::build(kExchangeSlotPrefix, 1), 0, 0);
    } catch (const std::exception& e) {
      if (peer_addresses_.find(e.what()) == p) return {p, e.what()};
    }
  }
  return {-1, ""};
}

void GlooMesh::check_usable(const CollectiveTag& tag) const {
  TG_CHECK(broken_.empty(), "[distributed] rank ", rank_, ": ", tag.describe(), " cannot run: ", broken_,
           " failed before it and the ranks are out of step (expected a new process group after a failed collective)");
}

void GlooMesh::mark_broken(const CollectiveTag& tag) {
  broken_ = tag.describe();
  try {
    context_->closeConnections();  // peers waiting on this rank fail now, not at their timeout
  } catch (const std::exception&) {
    // A pair that is already closed: nothing left to tell its peer.
  }
}

void GlooMesh::fail(const CollectiveTag& tag, const std::string& what) {
  mark_broken(tag);
  TG_FAIL("[distributed] rank ", rank_, ": ", tag.describe(), " ", what);
}

std::vector<std::string> GlooMesh::exchange(const CollectiveTag& tag, const std::string& mine) {
  check_usable(tag);
  const SigpipeBlock no_sigpipe;
  const size_t size = mine.size();
  std::string all(size * static_cast<size_t>(world_size_), '\0');
  std::copy(mine.begin(), mine.end(), all.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(rank_) * size));
  const auto deadline = Clock::now() + timeout_;
  int waiting_for = -1;
  try {
    // One buffer per peer, since Gloo reports only the last sender of a buffer and a timeout must
    // name the rank whose message never came; one slot for every exchange, since the messages carry
    // their sequence number and ranks out of step are told apart by what they say.
    const uint64_t slot = gloo::Slot::build(kExchangeSlotPrefix, 0);
    auto out = context_->createUnboundBuffer(all.data() + static_cast<size_t>(rank_) * size, size);
    std::vector<std::unique_ptr<gloo::transport::UnboundBuffer>> in(static_cast<size_t>(world_size_));
    for (int p = 0; p < world_size_; ++p) {
      if (p == rank_) continue;
      in[static_cast<size_t>(p)] = context_->createUnboundBuffer(all.data() + static_cast<size_t>(p) * size, size);
      in[static_cast<size_t>(p)]->recv(p, slot);
      out->send(p, slot);
    }
    for (int p = 0; p < world_size_; ++p) {
      if (p == rank_) continue;
      waiting_for = p;
      in[static_cast<size_t>(p)]->waitRecv(left_until(deadline));
    }
    waiting_for = -1;
    for (int i = 1; i < world_size_; ++i) out->waitSend(left_until(deadline));
  } catch (const Error&) {
    mark_broken(tag);
    throw;
  } catch (const std::exception& e) {
    fail_from_gloo(tag, e.what(), Clock::now() >= deadline, waiting_for);
  }
  std::vector<std::string> each;
  for (int p = 0; p < world_size_; ++p) each.push_back(all.substr(static_cast<size_t>(p) * size, size));
  return each;
}

void GlooMesh::run(const CollectiveTag& tag, const std::function<void()>& gloo_calls) {
  check_usable(tag);
  const SigpipeBlock no_sigpipe;
  const auto start = Clock::now();
  try {
    gloo_calls();
  } catch (const Error&) {
    mark_broken(tag);
    throw;
  } catch (const std::exception& e) {
    fail_from_gloo(tag, e.what(), Clock::now() - start >= timeout_, -1);
  }
}

void GlooMesh::fail_from_gloo(const CollectiveTag& tag, const std::string& message, bool timed_out, int waiting_for) {
  if (const int peer = peer_addresses_.find(message); peer >= 0) fail(tag, lost_peer(peer, message));
  if (!timed_out) fail(tag, "failed in Gloo: " + message);
  const std::string after = "timed out after " + net::format_duration(timeout_);
  // A peer that died while a transfer with it was under way (a send queued on its socket, a message
  // half received) is only noticed at the timeout: this Gloo does not wake those waits. Its
  // connection kept the error naming it.
  if (const auto [peer, why] = first_failed_peer(); peer >= 0) fail(tag, after + ": " + lost_peer(peer, why));
  if (waiting_for >= 0)
    fail(tag, after + " waiting for data from rank " + std::to_string(waiting_for) + ": expected every rank to issue "
              "the same collectives in the same order (did rank " + std::to_string(waiting_for) + " die, hang, or take "
              "another path?)");
  fail(tag, after + " in its transfers, after every rank had issued it (Gloo: " + message + "): a rank hung in the "
            "middle of it");
}

}  // namespace tg::distributed
