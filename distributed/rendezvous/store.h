// TcpStore: the key-value rendezvous every rank of a job meets at before collectives can start
// (rank 0 publishes the NCCL unique id, the others read it; barriers line the ranks up).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "distributed/rendezvous/environment.h"
#include "distributed/rendezvous/socket.h"

namespace tg::distributed {

class StoreServer;

// A small key-value store over TCP. Rank 0 (is_server) runs the server on a background thread and
// talks to it through a connection of its own like every other rank. Values are raw bytes (NUL
// bytes included). Calls from several threads of one process are serialized. Every wait ends after
// the timeout with a tg::Error naming what was awaited; a lost server is reported as such.
//
//   Environment env = Environment::from_env();
//   auto store = TcpStore::from_environment(env, std::chrono::seconds(60));
//   if (env.rank == 0) store->set("nccl_id", id_bytes);
//   std::string id = store->get("nccl_id");
class TcpStore {
 public:
  // Serves (is_server) and connects to host:port; clients retry until `timeout` since the server may
  // start later. port 0 with is_server picks a free port (see port()). `rank`, when known, lets a
  // timed-out barrier name the ranks that never arrived.
  TcpStore(const std::string& host, int port, int world_size, bool is_server, std::chrono::milliseconds timeout,
           int rank = -1);
  // Closes the connection; on rank 0 also stops the server (ranks still waiting see it go away).
  ~TcpStore();
  TcpStore(const TcpStore&) = delete;
  TcpStore& operator=(const TcpStore&) = delete;

  // The store of a launched job: rank 0 serves at MASTER_ADDR:MASTER_PORT, every rank connects.
  static std::unique_ptr<TcpStore> from_environment(const Environment& env, std::chrono::milliseconds timeout);

  // Stores `value` (any bytes) under `key`, replacing an earlier value and waking ranks waiting on it.
  void set(const std::string& key, const std::string& value);
  // The value of `key`, waiting until some rank sets it (at most the store's timeout).
  std::string get(const std::string& key);
  // The value of `key`, waiting at most `timeout` for some rank to set it.
  std::string get(const std::string& key, std::chrono::milliseconds timeout);
  // Adds `delta` to the integer under `key` (0 when unset) and returns the sum: a shared counter.
  int64_t add(const std::string& key, int64_t delta);
  // Whether `key` is set now, without waiting.
  bool check(const std::string& key);
  // Returns once all world_size ranks have called barrier(name) the same number of times.
  void barrier(const std::string& name);

  // The port the server listens on (useful when constructed with port 0).
  int port() const { return port_; }
  int world_size() const { return world_size_; }
  std::chrono::milliseconds timeout() const { return timeout_; }

 private:
  // Sends one request and returns its reply body after the status byte; throws on timeout or loss.
  std::string call(const std::string& body, std::chrono::milliseconds wait, const std::string& what);
  // Sends a request that may wait on the server; its value, or nothing when the wait ran out.
  std::optional<std::string> wait_locked(const std::string& body, std::chrono::milliseconds wait,
                                         const std::string& what);
  int64_t add_locked(const std::string& key, int64_t delta);
  [[noreturn]] void fail_lost() const;
  std::string where() const;

  std::string host_;
  int port_;
  int world_size_;
  int rank_;
  std::chrono::milliseconds timeout_;
  std::unique_ptr<StoreServer> server_;  // declared before the socket: it outlives our own connection
  net::Socket socket_;
  bool broken_ = false;  // a reply never came or the server left: later calls fail at once
  std::map<std::string, int64_t> barrier_rounds_;
  std::mutex mutex_;
};

}  // namespace tg::distributed
