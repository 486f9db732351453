// See Note [Launcher and rendezvous] in docs/launcher.md.
#include "distributed/rendezvous/store.h"

#include <optional>
#include <vector>

#include "distributed/rendezvous/store_server.h"
#include "tensor/check.h"

namespace tg::distributed {
namespace {

// Extra time a client waits for a reply beyond the server-side wait, before it gives the
// connection up as dead (a master host that vanished without closing the connection).
constexpr std::chrono::milliseconds kReplyGrace{10000};

}  // namespace

TcpStore::TcpStore(const std::string& host, int port, int world_size, bool is_server,
                   std::chrono::milliseconds timeout, int rank)
    : host_(host), port_(port), world_size_(world_size), rank_(rank), timeout_(timeout) {
  TG_CHECK(world_size >= 1, "[distributed] TcpStore world_size=", world_size, ": expected at least 1");
  TG_CHECK(rank < world_size, "[distributed] TcpStore rank=", rank, " but world_size=", world_size,
           ": expected rank < world_size (or -1 when unknown)");
  TG_CHECK(port >= (is_server ? 0 : 1) && port <= 65535, "[distributed] TcpStore port=", port,
           ": expected 1..65535", is_server ? " (or 0 for any free port)" : "");
  TG_CHECK(timeout.count() > 0, "[distributed] TcpStore timeout of ", timeout.count(), " ms: expected a positive timeout");
  if (is_server) {
    server_ = std::make_unique<StoreServer>(port);
    port_ = server_->port();
  }
  // The server listens on every interface, so rank 0 reaches its own server over loopback whatever
  // the master's name resolves to.
  std::string last_error;
  socket_ = net::connect_until(is_server ? "127.0.0.1" : host_, port_, net::Clock::now() + timeout_, last_error);
  TG_CHECK(socket_.valid(), "[distributed] could not connect to the rendezvous master (rank 0) at ", where(),
           " within ", net::format_duration(timeout_), " (last error: ", last_error,
           "): expected rank 0 to be listening there (check MASTER_ADDR and MASTER_PORT, and that rank 0 started)");
}

TcpStore::~TcpStore() = default;

std::unique_ptr<TcpStore> TcpStore::from_environment(const Environment& env, std::chrono::milliseconds timeout) {
  return std::make_unique<TcpStore>(env.master_addr, env.master_port, env.world_size, env.rank == 0, timeout,
                                    env.rank);
}

std::string TcpStore::where() const { return host_ + ":" + std::to_string(port_); }

void TcpStore::fail_lost() const {
  TG_FAIL("[distributed] lost the connection to the rendezvous master (rank 0) at ", where(),
          ": it exited or closed its store (see rank 0's output for why)");
}

std::string TcpStore::call(const std::string& body, std::chrono::milliseconds wait, const std::string& what) {
  if (broken_) fail_lost();
  if (!net::send_all(socket_.fd(), net::frame(body))) {
    broken_ = true;
    fail_lost();
  }
  auto deadline = net::Clock::now() + wait + kReplyGrace;
  char header[4];
  auto status = net::recv_exact(socket_.fd(), header, 4, deadline);
  std::string reply;
  if (status == net::ReadStatus::kOk) {
    reply.resize(net::read_u32(header));
    TG_CHECK(reply.size() <= net::kMaxFrame && !reply.empty(), "[distributed] the rendezvous master at ", where(),
             " sent a malformed reply: expected a tapegraph store at that address");
    status = net::recv_exact(socket_.fd(), reply.data(), reply.size(), deadline);
  }
  if (status != net::ReadStatus::kOk) broken_ = true;
  if (status == net::ReadStatus::kClosed) fail_lost();
  TG_CHECK(status == net::ReadStatus::kOk, "[distributed] the rendezvous master at ", where(), " did not answer ", what,
           " within ", net::format_duration(wait + kReplyGrace), ": expected a reply (is the master host reachable?)");
  return reply;
}

void TcpStore::set(const std::string& key, const std::string& value) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::string body;
  net::put_u8(body, static_cast<uint8_t>(StoreOp::kSet));
  net::put_bytes(body, key);
  net::put_bytes(body, value);
  call(body, timeout_, "set('" + key + "')");
}

std::optional<std::string> TcpStore::wait_locked(const std::string& body, std::chrono::milliseconds wait,
                                                 const std::string& what) {
  std::string reply = call(body, wait, what);
  if (static_cast<StoreStatus>(reply[0]) == StoreStatus::kTimedOut) return std::nullopt;
  net::Reader r(std::string_view(reply).substr(1));
  if (static_cast<StoreStatus>(reply[0]) == StoreStatus::kError) TG_FAIL(r.bytes());
  std::string value = r.bytes();
  TG_CHECK(r.ok(), "[distributed] the rendezvous master at ", where(), " sent a malformed reply to ", what);
  return value;
}

std::string TcpStore::get(const std::string& key) { return get(key, timeout_); }

std::string TcpStore::get(const std::string& key, std::chrono::milliseconds timeout) {
  TG_CHECK(timeout.count() > 0, "[distributed] TcpStore get('", key, "') with a timeout of ", timeout.count(),
           " ms: expected a positive timeout");
  std::lock_guard<std::mutex> lock(mutex_);
  std::string body;
  net::put_u8(body, static_cast<uint8_t>(StoreOp::kGet));
  net::put_bytes(body, key);
  net::put_i64(body, timeout.count());
  std::optional<std::string> value = wait_locked(body, timeout, "get('" + key + "')");
  TG_CHECK(value.has_value(), "[distributed] rendezvous timed out after ", net::format_duration(timeout),
           " waiting for key '", key, "' at ", where(), ": expected some rank to set it (did a rank fail earlier?)");
  return std::move(*value);
}

int64_t TcpStore::add_locked(const std::string& key, int64_t delta) {
  std::string body;
  net::put_u8(body, static_cast<uint8_t>(StoreOp::kAdd));
  net::put_bytes(body, key);
  net::put_i64(body, delta);
  std::string reply = call(body, timeout_, "add('" + key + "')");
  net::Reader r(std::string_view(reply).substr(1));
  if (static_cast<StoreStatus>(reply[0]) == StoreStatus::kError) TG_FAIL(r.bytes());
  int64_t value = r.i64();
  TG_CHECK(r.ok(), "[distributed] the rendezvous master at ", where(), " sent a malformed reply to add('", key, "')");
  return value;
}

int64_t TcpStore::add(const std::string& key, int64_t delta) {
  std::lock_guard<std::mutex> lock(mutex_);
  return add_locked(key, delta);
}

bool TcpStore::check(const std::string& key) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::string body;
  net::put_u8(body, static_cast<uint8_t>(StoreOp::kCheck));
  net::put_bytes(body, key);
  std::string reply = call(body, timeout_, "check('" + key + "')");
  return reply.size() >= 2 && reply[1] != 0;
}

void TcpStore::barrier(const std::string& name) {
  std::string prefix;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    // Each call of the same name is its own round, so a name can be reused (all ranks count alike).
    prefix = "__barrier/" + name + "/" + std::to_string(++barrier_rounds_[name]);
  }
  if (rank_ >= 0) set(prefix + "/rank/" + std::to_string(rank_), "");
  std::string body;
  net::put_u8(body, static_cast<uint8_t>(StoreOp::kArrive));
  net::put_bytes(body, prefix + "/count");
  net::put_bytes(body, prefix + "/done");
  net::put_i64(body, world_size_);
  net::put_i64(body, timeout_.count());
  std::optional<std::string> done;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    done = wait_locked(body, timeout_, "barrier('" + name + "')");
  }
  if (done) return;
  int64_t arrived = add(prefix + "/count", 0);
  std::string missing;
  int listed = 0;
  for (int r = 0; rank_ >= 0 && r < world_size_ && listed <= 16; ++r) {
    if (check(prefix + "/rank/" + std::to_string(r))) continue;
    missing += (listed == 0 ? "; missing ranks: " : ", ") + (listed == 16 ? std::string("...") : std::to_string(r));
    ++listed;
  }
  TG_FAIL("[distributed] barrier '", name, "' timed out after ", net::format_duration(timeout_), " at ", where(), ": ",
          arrived, " of ", world_size_, " ranks arrived", missing,
          " (expected every rank to reach the barrier; did one fail or take another path?)");
}

}  // namespace tg::distributed
