// See Note [CPU collectives] in docs/data_parallel.md.
#include "distributed/collectives/ring_links.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <random>

#include "distributed/collectives/collective_context.h"
#include "distributed/rendezvous/store.h"
#include "tensor/check.h"

namespace tg::distributed {
namespace {

using net::Clock;

constexpr char kMagic[8] = {'T', 'G', 'R', 'I', 'N', 'G', '0', '1'};
constexpr size_t kHelloBytes = 24;  // magic, token, rank

int remaining_ms(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return static_cast<int>(std::clamp<int64_t>(left, 0, 1 << 30));
}

std::string hello(uint64_t token, int rank) {
  std::string out(kMagic, sizeof(kMagic));
  net::put_i64(out, static_cast<int64_t>(token));
  net::put_i64(out, rank);
  return out;
}

}  // namespace

RingLinks::RingLinks(int rank, int world_size, TcpStore& store, std::chrono::milliseconds timeout,
                     const std::string& master_addr, int master_port)
    : rank_(rank), world_size_(world_size), timeout_(timeout) {
  const auto deadline = Clock::now() + timeout;
  net::Socket listener = net::listen_any(0);
  const char* ifname = std::getenv("TG_SOCKET_IFNAME");
  const std::string host = net::advertised_address(master_addr, master_port, ifname ? ifname : "");

  // A token drawn by rank 0 tells this group's connections from strays (an old job's ranks).
  uint64_t token = 0;
  if (rank == 0) {
    std::random_device device;
    token = (static_cast<uint64_t>(device()) << 32) ^ device() ^
            static_cast<uint64_t>(Clock::now().time_since_epoch().count());
    std::string bytes;
    net::put_i64(bytes, static_cast<int64_t>(token));
    store.set("tg/ring/token", bytes);
  } else {
    const std::string bytes = store.get("tg/ring/token");
    net::Reader r(bytes);
    token = static_cast<uint64_t>(r.i64());
  }
  std::string mine;
  net::put_bytes(mine, host);
  net::put_i64(mine, net::local_port(listener.fd()));
  store.set("tg/ring/addr/" + std::to_string(rank), mine);

  const std::string peer_bytes = store.get("tg/ring/addr/" + std::to_string(next()));
  net::Reader peer(peer_bytes);
  const std::string peer_host = peer.bytes();
  const int peer_port = static_cast<int>(peer.i64());
  TG_CHECK(peer.ok(), "[distributed] rank ", rank, " read a malformed address of rank ", next(), " from the store");
  std::string last_error;
  to_next_ = net::connect_until(peer_host, peer_port, deadline, last_error);
  TG_CHECK(to_next_.valid(), "[distributed] rank ", rank, " could not connect to rank ", next(), " at ", peer_host, ":",
           peer_port, " within ", net::format_duration(timeout), " (last error: ", last_error,
           "): expected every host to reach the others on any TCP port (a firewall? set TG_SOCKET_IFNAME to the "
           "interface the hosts share)");
  TG_CHECK(net::send_all(to_next_.fd(), hello(token, rank)), "[distributed] rank ", rank, ": rank ", next(),
           " at ", peer_host, ":", peer_port, " closed the connection while it was set up");
  net::set_blocking(to_next_.fd(), false);

  // Connections that do not greet with this group's token are dropped; the previous rank's is kept.
  while (!from_prev_.valid()) {
    net::Socket s = net::accept_until(listener.fd(), deadline);
    TG_CHECK(s.valid(), "[distributed] rank ", rank, ": rank ", prev(), " did not connect within ",
             net::format_duration(timeout), ": expected it to create the process group too (did it fail or is "
             "it unable to reach this host? set TG_SOCKET_IFNAME to the interface the hosts share)");
    char buf[kHelloBytes];
    auto status = net::recv_exact(s.fd(), buf, sizeof(buf), std::min(deadline, Clock::now() + std::chrono::seconds(5)));
    if (status != net::ReadStatus::kOk || std::memcmp(buf, kMagic, sizeof(kMagic)) != 0) continue;
    net::Reader r(std::string_view(buf + sizeof(kMagic), kHelloBytes - sizeof(kMagic)));
    if (static_cast<uint64_t>(r.i64()) != token) continue;
    const int64_t from = r.i64();
    TG_CHECK(from == prev(), "[distributed] rank ", rank, " was dialed by rank ", from, ", expected rank ", prev(),
             " (its predecessor in the ring)");
    from_prev_ = std::move(s);
  }
}

std::string CollectiveTag::describe() const { return describe_collective(name, sequence, context); }

void RingLinks::mark_broken(const CollectiveTag& tag) {
  broken_ = tag.describe();
  to_next_.close();
  from_prev_.close();
}

void RingLinks::fail(const CollectiveTag& tag, const std::string& what) {
  mark_broken(tag);
  TG_FAIL("[distributed] rank ", rank_, ": ", tag.describe(), " ", what);
}

void RingLinks::exchange(const CollectiveTag& tag, const void* send, size_t send_bytes, void* recv, size_t recv_bytes,
                         const std::function<void(size_t)>& on_received) {
  TG_CHECK(broken_.empty(), "[distributed] rank ", rank_, ": ", tag.describe(), " cannot run: ", broken_,
           " failed before it and the ranks are out of step (expected a new process group after a failed collective)");
  const auto* out = static_cast<const char*>(send);
  auto* in = static_cast<char*>(recv);
  size_t sent = 0, got = 0;
  auto deadline = Clock::now() + timeout_;
  while (sent < send_bytes || got < recv_bytes) {
    pollfd fds[2];
    int count = 0, send_slot = -1, recv_slot = -1;
    if (got < recv_bytes) {
      recv_slot = count;
      fds[count++] = pollfd{from_prev_.fd(), POLLIN, 0};
    }
    if (sent < send_bytes) {
      send_slot = count;
      fds[count++] = pollfd{to_next_.fd(), POLLOUT, 0};
    }
    const int ready = ::poll(fds, static_cast<nfds_t>(count), remaining_ms(deadline));
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) fail(tag, std::string("failed: poll: ") + std::strerror(errno));
    if (ready == 0) {
      const bool receiving = got < recv_bytes;
      const std::string peer = std::to_string(receiving ? prev() : next());
      const std::string waiting = receiving ? " waiting for data from rank " + peer : " waiting for rank " + peer + " to take data";
      const std::string moved = std::to_string(receiving ? got : sent) + " of " +
                                std::to_string(receiving ? recv_bytes : send_bytes) + " bytes moved";
      fail(tag, "timed out after " + net::format_duration(timeout_) + waiting + " (" + moved +
                    "): expected every rank to issue the same collectives in the same order (did rank " + peer +
                    " die, hang, or take another path?)");
    }
    bool progress = false;
    if (recv_slot >= 0 && fds[recv_slot].revents != 0) {
      const ssize_t n = ::recv(from_prev_.fd(), in + got, recv_bytes - got, 0);
      if (n > 0) {
        got += static_cast<size_t>(n);
        progress = true;
        if (on_received) on_received(got);
      } else if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
        fail(tag, "lost rank " + std::to_string(prev()) + ": it closed the connection" +
                      (n == 0 ? std::string() : std::string(" (") + std::strerror(errno) + ")") +
                      " (it exited or crashed; see its output for why)");
      }
    }
    if (send_slot >= 0 && fds[send_slot].revents != 0) {
      const ssize_t n = ::send(to_next_.fd(), out + sent, send_bytes - sent, MSG_NOSIGNAL);
      if (n > 0) {
        sent += static_cast<size_t>(n);
        progress = true;
      } else if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        fail(tag, "lost rank " + std::to_string(next()) + ": " + std::strerror(errno) +
                      " (it exited or crashed; see its output for why)");
      }
    }
    if (progress) deadline = Clock::now() + timeout_;
  }
}

}  // namespace tg::distributed
