// The rendezvous store's server side: one background thread that owns the key-value map and
// answers every rank's connection (poll over all sockets), holding a blocking get until its key
// is set or its timeout passes. Used by TcpStore on rank 0; not meant to be used directly.
#pragma once

#include <cstdint>
#include <thread>

#include "distributed/rendezvous/socket.h"

namespace tg::distributed {

// Requests a client sends and the status byte that starts every reply. kArrive (barriers) adds one
// to a counter, sets a "done" key when the counter reaches a target, and waits for that key.
enum class StoreOp : uint8_t { kSet = 1, kGet = 2, kAdd = 3, kCheck = 4, kArrive = 5 };
enum class StoreStatus : uint8_t { kOk = 0, kTimedOut = 1, kError = 2 };

// Listens on every interface at a port and serves the store until destroyed.
class StoreServer {
 public:
  // Binds (port 0: any free port) and starts serving; throws tg::Error when the port is taken.
  explicit StoreServer(int port);
  // Stops the thread and closes every connection (waiting clients see the master go away).
  ~StoreServer();
  StoreServer(const StoreServer&) = delete;
  StoreServer& operator=(const StoreServer&) = delete;

  // The port it listens on (the chosen one when constructed with 0).
  int port() const { return port_; }

 private:
  void run();

  net::Socket listener_;
  net::Socket wake_read_, wake_write_;  // a byte written here ends the poll loop
  int port_ = 0;
  std::thread thread_;
};

}  // namespace tg::distributed
