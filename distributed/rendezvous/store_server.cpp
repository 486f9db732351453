// See Note [Launcher and rendezvous] in docs/launcher.md.
#include "distributed/rendezvous/store_server.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "tensor/check.h"

namespace tg::distributed {
namespace {

using net::Clock;

// One rank's connection: bytes received but not yet parsed, bytes to send, and whether a get is
// pending (its later requests wait behind it, keeping replies in request order).
struct Conn {
  net::Socket sock;
  std::string in, out;
  bool waiting = false;
  bool closed = false;  // the peer hung up; requests it sent before still apply
  bool dead = false;    // unusable: reset, or sent something that is not a request
};

// A get whose key was not there yet.
struct Waiter {
  uint64_t conn;
  std::string key;
  Clock::time_point deadline;
};

// Everything the serving thread owns; only that thread touches it.
class ServerState {
 public:
  ServerState(int listener, int wake) : listener_(listener), wake_(wake) {}
  void serve();

 private:
  void accept_all();
  void read_from(Conn& c);
  void flush(Conn& c);
  bool process(uint64_t id, Conn& c);
  void handle(uint64_t id, Conn& c, std::string_view body);
  std::optional<int64_t> add_to(Conn& c, const std::string& key, int64_t delta);
  void get_or_wait(uint64_t id, Conn& c, const std::string& key, std::chrono::milliseconds wait);
  void reply(Conn& c, StoreStatus status, const std::string& payload = {});
  void wake_waiters(const std::string& key);
  void expire_waiters();
  int poll_timeout_ms() const;

  int listener_, wake_;
  uint64_t next_id_ = 0;
  std::unordered_map<std::string, std::string> data_;
  std::map<uint64_t, Conn> conns_;
  std::vector<Waiter> waiters_;
};

void ServerState::serve() {
  std::vector<pollfd> fds;
  std::vector<uint64_t> ids;
  while (true) {
    fds.assign({pollfd{wake_, POLLIN, 0}, pollfd{listener_, POLLIN, 0}});
    ids.clear();
    for (auto& [id, c] : conns_) {
      fds.push_back(pollfd{c.sock.fd(), static_cast<short>(POLLIN | (c.out.empty() ? 0 : POLLOUT)), 0});
      ids.push_back(id);
    }
    int n = ::poll(fds.data(), fds.size(), poll_timeout_ms());
    if (n < 0 && errno != EINTR) {
      std::fprintf(stderr, "[distributed] rendezvous server: poll failed: %s\n", std::strerror(errno));
      return;
    }
    if (n > 0 && fds[0].revents != 0) return;  // asked to stop
    if (n > 0 && (fds[1].revents & POLLIN)) accept_all();
    for (size_t i = 0; n > 0 && i < ids.size(); ++i) {
      Conn& c = conns_.at(ids[i]);
      short ev = fds[i + 2].revents;
      if (ev & (POLLIN | POLLHUP | POLLERR)) read_from(c);
      if (!c.dead && (ev & POLLOUT)) flush(c);
    }
    expire_waiters();
    // The complete requests received, and those queued behind a get that has now been answered.
    for (bool progress = true; progress;) {
      progress = false;
      for (auto& [id, c] : conns_) progress |= process(id, c);
    }
    for (auto it = conns_.begin(); it != conns_.end();) {
      if (!it->second.dead && !it->second.closed) {
        ++it;
        continue;
      }
      std::erase_if(waiters_, [&](const Waiter& w) { return w.conn == it->first; });
      it = conns_.erase(it);
    }
  }
}

void ServerState::accept_all() {
  while (true) {
    int fd = ::accept4(listener_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      return;  // EAGAIN: no more pending; other errors (EMFILE): retried on the next wake-up
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    conns_[next_id_++].sock = net::Socket(fd);
  }
}

void ServerState::read_from(Conn& c) {
  char buf[65536];
  while (true) {
    ssize_t got = ::recv(c.sock.fd(), buf, sizeof(buf), 0);
    if (got > 0) {
      c.in.append(buf, static_cast<size_t>(got));
      continue;
    }
    if (got < 0 && errno == EINTR) continue;
    if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    c.closed = true;  // closed by the peer, or reset
    return;
  }
}

void ServerState::flush(Conn& c) {
  while (!c.out.empty() && !c.dead) {
    ssize_t n = ::send(c.sock.fd(), c.out.data(), c.out.size(), MSG_NOSIGNAL);
    if (n > 0) {
      c.out.erase(0, static_cast<size_t>(n));
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      return;  // the rest goes out when poll reports the socket writable
    } else {
      c.dead = true;
    }
  }
}

// Handles every complete request buffered for `c` until one has to wait; true if any was handled.
bool ServerState::process(uint64_t id, Conn& c) {
  bool handled = false;
  while (!c.dead && !c.waiting && c.in.size() >= 4) {
    uint32_t len = net::read_u32(c.in.data());
    if (len > net::kMaxFrame) {
      c.dead = true;  // not one of our clients
      break;
    }
    if (c.in.size() < 4 + static_cast<size_t>(len)) break;
    std::string body = c.in.substr(4, len);
    c.in.erase(0, 4 + static_cast<size_t>(len));
    handle(id, c, body);
    handled = true;
  }
  return handled;
}

void ServerState::reply(Conn& c, StoreStatus status, const std::string& payload) {
  std::string body;
  net::put_u8(body, static_cast<uint8_t>(status));
  body += payload;
  c.out += net::frame(body);
  flush(c);
}

// At most a year, so a deadline cannot overflow the clock.
std::chrono::milliseconds clamp_wait(int64_t ms) {
  return std::chrono::milliseconds(std::clamp<int64_t>(ms, 0, int64_t{365} * 24 * 3600 * 1000));
}

// Adds `delta` to the counter under `key`; nothing (and an error reply) when it holds other bytes.
std::optional<int64_t> ServerState::add_to(Conn& c, const std::string& key, int64_t delta) {
  std::string& value = data_[key];
  int64_t current = 0;
  if (!value.empty()) {
    auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), current);
    if (ec != std::errc() || end != value.data() + value.size()) {
      std::string message;
      net::put_bytes(message, "[distributed] store key '" + key +
                                  "' holds a value that is not a decimal integer: expected add() only on keys "
                                  "written by add()");
      reply(c, StoreStatus::kError, message);
      return std::nullopt;
    }
  }
  current += delta;
  value = std::to_string(current);
  return current;
}

// Answers with the value of `key` now, or parks the request until it is set or `wait` passes.
void ServerState::get_or_wait(uint64_t id, Conn& c, const std::string& key, std::chrono::milliseconds wait) {
  auto it = data_.find(key);
  if (it != data_.end()) {
    std::string payload;
    net::put_bytes(payload, it->second);
    reply(c, StoreStatus::kOk, payload);
  } else {
    c.waiting = true;
    waiters_.push_back({id, key, Clock::now() + wait});
  }
}

void ServerState::handle(uint64_t id, Conn& c, std::string_view body) {
  net::Reader r(body);
  auto op = static_cast<StoreOp>(r.u8());
  std::string key = r.bytes();
  if (op == StoreOp::kSet) {
    std::string value = r.bytes();
    if (!r.ok()) {
      c.dead = true;
      return;
    }
    data_[key] = std::move(value);
    reply(c, StoreStatus::kOk);
    wake_waiters(key);
  } else if (op == StoreOp::kGet) {
    auto wait = clamp_wait(r.i64());
    if (!r.ok()) {
      c.dead = true;
      return;
    }
    get_or_wait(id, c, key, wait);
  } else if (op == StoreOp::kAdd) {
    int64_t delta = r.i64();
    if (!r.ok()) {
      c.dead = true;
      return;
    }
    auto sum = add_to(c, key, delta);
    if (!sum) return;
    std::string payload;
    net::put_i64(payload, *sum);
    reply(c, StoreStatus::kOk, payload);
    wake_waiters(key);
  } else if (op == StoreOp::kArrive) {
    // One request per rank and barrier, so every rank is answered in the server step that releases
    // them all; a rank 0 released first and leaving at once cannot strand a rank between requests.
    std::string done_key = r.bytes();
    int64_t target = r.i64();
    auto wait = clamp_wait(r.i64());
    if (!r.ok()) {
      c.dead = true;
      return;
    }
    auto count = add_to(c, key, 1);
    if (!count) return;
    if (*count >= target) data_[done_key] = std::string();
    get_or_wait(id, c, done_key, wait);
    if (*count >= target) wake_waiters(done_key);
  } else if (op == StoreOp::kCheck && r.ok()) {
    std::string payload;
    net::put_u8(payload, data_.count(key) ? 1 : 0);
    reply(c, StoreStatus::kOk, payload);
  } else {
    c.dead = true;  // unknown request: not one of our clients
  }
}

void ServerState::wake_waiters(const std::string& key) {
  const std::string& value = data_.at(key);
  std::erase_if(waiters_, [&](const Waiter& w) {
    if (w.key != key) return false;
    Conn& c = conns_.at(w.conn);
    std::string payload;
    net::put_bytes(payload, value);
    c.waiting = false;
    reply(c, StoreStatus::kOk, payload);
    return true;
  });
}

void ServerState::expire_waiters() {
  auto now = Clock::now();
  std::erase_if(waiters_, [&](const Waiter& w) {
    if (w.deadline > now) return false;
    Conn& c = conns_.at(w.conn);
    c.waiting = false;
    reply(c, StoreStatus::kTimedOut);
    return true;
  });
}

int ServerState::poll_timeout_ms() const {
  if (waiters_.empty()) return -1;
  auto earliest = waiters_.front().deadline;
  for (const Waiter& w : waiters_) earliest = std::min(earliest, w.deadline);
  auto left = std::chrono::ceil<std::chrono::milliseconds>(earliest - Clock::now()).count();
  return static_cast<int>(std::clamp<int64_t>(left, 0, 1 << 30));
}

}  // namespace

StoreServer::StoreServer(int port) {
  listener_ = net::listen_any(port);
  port_ = net::local_port(listener_.fd());
  int pipe_fds[2];
  TG_CHECK(::pipe2(pipe_fds, O_CLOEXEC) == 0, "[distributed] cannot create the rendezvous server's wake-up pipe: ",
           std::strerror(errno));
  wake_read_ = net::Socket(pipe_fds[0]);
  wake_write_ = net::Socket(pipe_fds[1]);
  thread_ = std::thread([this] { run(); });
}

StoreServer::~StoreServer() {
  char byte = 1;
  while (::write(wake_write_.fd(), &byte, 1) < 0 && errno == EINTR) {
  }
  thread_.join();
}

void StoreServer::run() {
  try {
    ServerState state(listener_.fd(), wake_read_.fd());
    state.serve();
  } catch (const std::exception& e) {
    // Out of memory or similar: the clients see the master go away and report it.
    std::fprintf(stderr, "[distributed] rendezvous server stopped: %s\n", e.what());
  }
}

}  // namespace tg::distributed
