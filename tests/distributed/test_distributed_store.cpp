// tg::distributed: the launcher's variables (defaults, every malformed value) and TcpStore, with
// threads acting as ranks over loopback: set/get/add/check/barrier, binary values, timeouts, a lost
// master, a server that starts after its clients.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <map>
#include <thread>
#include <vector>

#include "distributed/rendezvous/environment.h"
#include "distributed/rendezvous/socket.h"
#include "distributed/rendezvous/store.h"
#include "support/test_support.h"

namespace tg::distributed {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr const char* kVars[] = {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"};

// Sets exactly the given launcher variables (the others unset) for one test, restoring them after.
class ScopedEnv {
 public:
  explicit ScopedEnv(const std::map<std::string, std::string>& vars) {
    for (const char* name : kVars) {
      if (const char* v = std::getenv(name)) saved_[name] = v;
      unsetenv(name);
    }
    for (const auto& [name, value] : vars) setenv(name.c_str(), value.c_str(), 1);
  }
  ~ScopedEnv() {
    for (const char* name : kVars) unsetenv(name);
    for (const auto& [name, value] : saved_) setenv(name.c_str(), value.c_str(), 1);
  }

 private:
  std::map<std::string, std::string> saved_;
};

TEST(DistributedEnvironment, DefaultsToOneProcess) {
  ScopedEnv env({});
  Environment e = Environment::from_env();
  EXPECT_EQ(e.rank, 0);
  EXPECT_EQ(e.world_size, 1);
  EXPECT_EQ(e.local_rank, 0);
  EXPECT_EQ(e.local_world_size, 1);
  EXPECT_EQ(e.master_addr, "127.0.0.1");
  EXPECT_EQ(e.master_port, 29500);
}

TEST(DistributedEnvironment, ReadsLauncherVariables) {
  ScopedEnv env({{"RANK", "5"}, {"WORLD_SIZE", "8"}, {"LOCAL_RANK", "1"}, {"LOCAL_WORLD_SIZE", "4"},
                 {"MASTER_ADDR", "node0.example"}, {"MASTER_PORT", "1234"}});
  Environment e = Environment::from_env();
  EXPECT_EQ(e.rank, 5);
  EXPECT_EQ(e.world_size, 8);
  EXPECT_EQ(e.local_rank, 1);
  EXPECT_EQ(e.local_world_size, 4);
  EXPECT_EQ(e.master_addr, "node0.example");
  EXPECT_EQ(e.master_port, 1234);
}

TEST(DistributedEnvironment, LocalVariablesDefaultToOneHost) {
  ScopedEnv env({{"RANK", "1"}, {"WORLD_SIZE", "2"}});
  Environment e = Environment::from_env();
  EXPECT_EQ(e.local_rank, 1);
  EXPECT_EQ(e.local_world_size, 2);
  EXPECT_EQ(e.master_port, 29500);
}

TEST(DistributedEnvironment, RejectsMalformedValues) {
  auto expect_error = [](const std::map<std::string, std::string>& vars, const std::string& message) {
    ScopedEnv env(vars);
    EXPECT_THROW_MSG(Environment::from_env(), message);
  };
  expect_error({{"RANK", "3"}, {"WORLD_SIZE", "2"}},
               "[distributed] RANK=3 but WORLD_SIZE=2: expected 0 <= RANK < WORLD_SIZE");
  expect_error({{"RANK", "-1"}, {"WORLD_SIZE", "2"}}, "RANK=-1 but WORLD_SIZE=2: expected 0 <= RANK < WORLD_SIZE");
  expect_error({{"RANK", "one"}, {"WORLD_SIZE", "2"}}, "RANK='one' is not a number: expected a decimal integer");
  expect_error({{"RANK", "0"}, {"WORLD_SIZE", "2x"}}, "WORLD_SIZE='2x' is not a number");
  expect_error({{"RANK", "0"}, {"WORLD_SIZE", ""}}, "WORLD_SIZE='' is not a number");
  expect_error({{"RANK", "0"}, {"WORLD_SIZE", "99999999999"}}, "WORLD_SIZE='99999999999' is not a number");
  expect_error({{"RANK", "0"}, {"WORLD_SIZE", "0"}}, "WORLD_SIZE=0: expected WORLD_SIZE >= 1");
  expect_error({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "2"}, {"LOCAL_WORLD_SIZE", "2"}},
               "LOCAL_RANK=2 but LOCAL_WORLD_SIZE=2: expected 0 <= LOCAL_RANK < LOCAL_WORLD_SIZE");
  expect_error({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"LOCAL_WORLD_SIZE", "4"}},
               "LOCAL_WORLD_SIZE=4 but WORLD_SIZE=2: expected 1 <= LOCAL_WORLD_SIZE <= WORLD_SIZE");
  expect_error({{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"MASTER_PORT", "70000"}},
               "MASTER_PORT=70000: expected a TCP port in 1..65535");
  expect_error({{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"MASTER_PORT", "0"}}, "MASTER_PORT=0: expected a TCP port");
  expect_error({{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"MASTER_PORT", "http"}}, "MASTER_PORT='http' is not a number");
  expect_error({{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"MASTER_ADDR", ""}}, "MASTER_ADDR is empty");
  expect_error({{"MASTER_ADDR", "10.0.0.1"}, {"MASTER_PORT", "29500"}},
               "MASTER_ADDR=10.0.0.1, MASTER_PORT=29500 set but RANK and WORLD_SIZE are not");
  expect_error({{"RANK", "1"}}, "RANK=1 set but WORLD_SIZE is not");
  expect_error({{"WORLD_SIZE", "2"}}, "WORLD_SIZE=2 set but RANK is not");
}

// A server on a free port (chosen by the kernel) for `world` ranks.
std::unique_ptr<TcpStore> make_server(int world, std::chrono::milliseconds timeout = 20s) {
  return std::make_unique<TcpStore>("127.0.0.1", 0, world, true, timeout, 0);
}

TEST(TcpStore, RanksMeetThroughSetGetAddAndBarrier) {
  constexpr int kWorld = 4;
  auto server = make_server(kWorld);
  const int port = server->port();
  std::vector<std::string> seen(kWorld * kWorld);
  std::vector<int64_t> counter_after_barrier(kWorld);
  std::atomic<int> failures{0};
  auto rank_main = [&](int rank, TcpStore& store) {
    try {
      store.set("rank/" + std::to_string(rank), "value of " + std::to_string(rank));
      store.add("counter", 1);
      store.barrier("after_set");
      counter_after_barrier[rank] = store.add("counter", 0);
      for (int r = 0; r < kWorld; ++r) seen[rank * kWorld + r] = store.get("rank/" + std::to_string(r));
      EXPECT_TRUE(store.check("rank/0"));
      EXPECT_FALSE(store.check("never/set"));
      store.barrier("after_set");  // the same name again is a new round
      store.barrier("end");
    } catch (const std::exception& e) {
      ADD_FAILURE() << "rank " << rank << ": " << e.what();
      ++failures;
    }
  };
  std::vector<std::thread> threads;
  for (int rank = 1; rank < kWorld; ++rank) {
    threads.emplace_back([&, rank] {
      TcpStore client("127.0.0.1", port, kWorld, false, 20s, rank);
      rank_main(rank, client);
    });
  }
  rank_main(0, *server);
  for (auto& t : threads) t.join();
  ASSERT_EQ(failures.load(), 0);
  for (int rank = 0; rank < kWorld; ++rank) {
    EXPECT_EQ(counter_after_barrier[rank], kWorld);
    for (int r = 0; r < kWorld; ++r) EXPECT_EQ(seen[rank * kWorld + r], "value of " + std::to_string(r));
  }
}

// The usual end of a job: a last barrier, then rank 0 closes the store at once. Every other rank
// must still get out of the barrier, whoever arrived last.
TEST(TcpStore, RankZeroMayLeaveRightAfterTheLastBarrier) {
  constexpr int kWorld = 3;
  for (int round = 0; round < 20; ++round) {
    auto server = make_server(kWorld);
    const int port = server->port();
    std::atomic<int> failures{0};
    std::vector<std::thread> threads;
    for (int rank = 1; rank < kWorld; ++rank) {
      threads.emplace_back([&, rank] {
        try {
          TcpStore client("127.0.0.1", port, kWorld, false, 20s, rank);
          if ((round + rank) % 2 == 0) std::this_thread::sleep_for(1ms);
          client.barrier("end");
        } catch (const std::exception& e) {
          ADD_FAILURE() << "rank " << rank << ": " << e.what();
          ++failures;
        }
      });
    }
    if (round % 3 == 0) std::this_thread::sleep_for(2ms);
    server->barrier("end");
    server.reset();  // the other ranks may not have read their answer yet

    for (auto& t : threads) t.join();
    ASSERT_EQ(failures.load(), 0) << "round " << round;
  }
}

TEST(TcpStore, GetWaitsForALaterSet) {
  auto server = make_server(2);
  TcpStore client("127.0.0.1", server->port(), 2, false, 20s, 1);
  std::thread setter([&] {
    std::this_thread::sleep_for(200ms);
    server->set("late", "here");
  });
  EXPECT_EQ(client.get("late"), "here");
  setter.join();
  EXPECT_EQ(client.add("n", 5), 5);
  EXPECT_EQ(server->add("n", -7), -2);
  EXPECT_EQ(client.get("n"), "-2");
  client.set("n", "not a number");
  EXPECT_THROW_MSG(client.add("n", 1), "store key 'n' holds a value that is not a decimal integer");
  EXPECT_EQ(client.get("n"), "not a number");  // the connection is still usable after the error
}

TEST(TcpStore, ValuesAreBinarySafe) {
  auto server = make_server(2);
  TcpStore client("127.0.0.1", server->port(), 2, false, 20s, 1);
  std::string all_bytes;
  for (int i = 0; i < 256; ++i) all_bytes.push_back(static_cast<char>(i));
  std::string id(128, '\0');  // an NCCL unique id is 128 raw bytes, NULs included
  for (int i = 0; i < 128; i += 3) id[i] = static_cast<char>(0xff - i);
  std::string big(3 << 20, '\0');  // more than a socket buffer: sent and received in pieces
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 2654435761u >> 24);
  server->set("all_bytes", all_bytes);
  server->set(std::string("key\0with nul", 12), id);
  client.set("big", big);
  client.set("empty", "");
  EXPECT_EQ(client.get("all_bytes"), all_bytes);
  EXPECT_EQ(client.get(std::string("key\0with nul", 12)), id);
  EXPECT_EQ(server->get("big"), big);
  EXPECT_EQ(server->get("empty"), "");
  EXPECT_TRUE(client.check("empty"));
  EXPECT_FALSE(client.check("key"));  // a prefix of the key holding a NUL is another key
}

TEST(TcpStore, GetTimesOutNamingTheKeyAndStaysUsable) {
  auto server = make_server(2, 300ms);
  TcpStore client("127.0.0.1", server->port(), 2, false, 300ms, 1);
  const std::string where = "127.0.0.1:" + std::to_string(server->port());
  auto start = Clock::now();
  EXPECT_THROW_MSG(client.get("nccl_id"),
                   "[distributed] rendezvous timed out after 300 ms waiting for key 'nccl_id' at " + where);
  EXPECT_LT(Clock::now() - start, 5s);
  client.set("nccl_id", "ok");
  EXPECT_EQ(server->get("nccl_id"), "ok");
}

TEST(TcpStore, BarrierTimeoutNamesTheMissingRanks) {
  auto server = make_server(3, 1s);
  TcpStore client("127.0.0.1", server->port(), 3, false, 1s, 1);
  const std::string where = "127.0.0.1:" + std::to_string(server->port());
  std::thread rank1([&] { EXPECT_THROW_MSG(client.barrier("init"), "2 of 3 ranks arrived; missing ranks: 2"); });
  EXPECT_THROW_MSG(server->barrier("init"), "[distributed] barrier 'init' timed out after 1 s at " + where +
                                                ": 2 of 3 ranks arrived; missing ranks: 2");
  rank1.join();
  EXPECT_THROW_MSG(server->barrier("again"), "1 of 3 ranks arrived; missing ranks: 1, 2");
}

TEST(TcpStore, ClientSeesTheMasterGoAway) {
  auto server = make_server(2, 30s);
  const int port = server->port();
  TcpStore client("127.0.0.1", port, 2, false, 30s, 1);
  std::atomic<bool> waiting{false};
  std::string message;
  auto start = Clock::now();
  std::thread rank1([&] {
    try {
      waiting = true;
      client.get("never_set");
    } catch (const Error& e) {
      message = e.what();
    }
  });
  while (!waiting) std::this_thread::yield();
  std::this_thread::sleep_for(200ms);
  server.reset();  // rank 0 exits while rank 1 waits
  rank1.join();
  EXPECT_LT(Clock::now() - start, 10s);
  EXPECT_NE(message.find("[distributed] lost the connection to the rendezvous master (rank 0) at 127.0.0.1:" +
                         std::to_string(port)),
            std::string::npos)
      << message;
  // Later calls fail the same way at once.
  EXPECT_THROW_MSG(client.set("k", "v"), "lost the connection to the rendezvous master");
}

TEST(TcpStore, ClientWaitsForAServerThatStartsLater) {
  const int port = net::find_free_port();
  std::string got;
  std::thread rank1([&] {
    try {
      TcpStore client("127.0.0.1", port, 2, false, 20s, 1);
      client.set("from_1", "one");
      got = client.get("from_0");
      client.barrier("done");
    } catch (const std::exception& e) {
      ADD_FAILURE() << e.what();
    }
  });
  std::this_thread::sleep_for(400ms);
  {
    TcpStore server("127.0.0.1", port, 2, true, 20s, 0);
    server.set("from_0", "zero");
    EXPECT_EQ(server.get("from_1"), "one");
    server.barrier("done");
    rank1.join();
  }
  EXPECT_EQ(got, "zero");
}

TEST(TcpStore, ConnectTimesOutWithoutAServer) {
  const int port = net::find_free_port();
  auto start = Clock::now();
  EXPECT_THROW_MSG(TcpStore("127.0.0.1", port, 2, false, 300ms, 1),
                   "[distributed] could not connect to the rendezvous master (rank 0) at 127.0.0.1:" +
                       std::to_string(port) + " within 300 ms");
  EXPECT_LT(Clock::now() - start, 5s);
}

TEST(TcpStore, PortTakenAndBadArguments) {
  auto server = make_server(1);
  EXPECT_THROW_MSG(TcpStore("127.0.0.1", server->port(), 1, true, 1s, 0),
                   "cannot listen on port " + std::to_string(server->port()));
  EXPECT_THROW_MSG(TcpStore("127.0.0.1", 0, 2, false, 1s), "TcpStore port=0: expected 1..65535");
  EXPECT_THROW_MSG(TcpStore("127.0.0.1", 1234, 0, false, 1s), "TcpStore world_size=0: expected at least 1");
  EXPECT_THROW_MSG(TcpStore("127.0.0.1", 1234, 2, false, 0ms), "expected a positive timeout");
}

TEST(TcpStore, FromEnvironmentServesOnRankZero) {
  Environment env;
  env.master_port = net::find_free_port();
  auto store = TcpStore::from_environment(env, 5s);
  EXPECT_EQ(store->port(), env.master_port);
  store->set("a", "b");
  EXPECT_EQ(store->get("a"), "b");
  store->barrier("single");  // one rank: returns at once
}

}  // namespace
}  // namespace tg::distributed
