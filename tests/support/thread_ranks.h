// Several ranks of one CPU process group as threads of the test process: each thread builds its
// own ProcessGroup (backend "cpu") from an Environment with its rank and a shared free port, then
// runs the test's body. Collectives between the threads travel over loopback TCP like between
// processes.
//
//   tg::testing::run_ranks(3, [&](tg::distributed::ProcessGroup& group) {
//     group.all_reduce(x[group.rank()], out[group.rank()], tg::distributed::ReduceOp::Sum);
//   });
#pragma once

#include <chrono>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "distributed/collectives/process_group.h"
#include "distributed/rendezvous/socket.h"

namespace tg::testing {

// The options run_ranks uses unless given others: the CPU backend and a timeout short enough for
// a test to fail rather than hang.
inline distributed::InitOptions thread_rank_options(std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
  distributed::InitOptions options;
  options.backend = "cpu";
  options.timeout = timeout;
  return options;
}

// Runs body(group) on `world` threads, rank r on thread r, and waits for all of them. Returns what
// each rank threw (null for none), indexed by rank; gtest assertions inside `body` work as usual.
inline std::vector<std::exception_ptr> run_ranks_collecting(
    int world, const std::function<void(distributed::ProcessGroup&)>& body,
    const distributed::InitOptions& options = thread_rank_options()) {
  const int port = distributed::net::find_free_port();
  std::vector<std::exception_ptr> errors(static_cast<size_t>(world));
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      try {
        distributed::Environment env;
        env.rank = env.local_rank = r;
        env.world_size = env.local_world_size = world;
        env.master_addr = "127.0.0.1";
        env.master_port = port;
        distributed::ProcessGroup group(env, options);
        body(group);
      } catch (...) {
        errors[static_cast<size_t>(r)] = std::current_exception();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  return errors;
}

// As run_ranks_collecting, but records a test failure for each rank that threw, with its message.
inline void run_ranks(int world, const std::function<void(distributed::ProcessGroup&)>& body,
                      const distributed::InitOptions& options = thread_rank_options()) {
  const std::vector<std::exception_ptr> errors = run_ranks_collecting(world, body, options);
  for (size_t r = 0; r < errors.size(); ++r) {
    if (!errors[r]) continue;
    try {
      std::rethrow_exception(errors[r]);
    } catch (const std::exception& e) {
      ADD_FAILURE() << "rank " << r << " of " << world << " threw: " << e.what();
    }
  }
}

}  // namespace tg::testing
