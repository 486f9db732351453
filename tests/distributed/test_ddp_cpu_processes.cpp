// DistributedDataParallel on the CPU backend (Gloo), across processes started by tgrun: two ranks
// on one host, and two "hosts" (two tgrun, --nnodes 2, on loopback addresses 127.0.0.2 and
// 127.0.0.3, with the store on the first or on 127.0.0.1) train the digits MLP to the losses and
// end with the parameters of a one-process run on the whole batches, eagerly and compiled
// (aot_eager); a rank killed on one host (at a step's start, or by a timer anywhere in a step)
// makes the other host's rank fail naming it; a rank that stops calling collectives makes the
// others time out naming the collective, its DDP bucket and the step, and every rank exits.
#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <string>

#include "distributed/rendezvous/socket.h"
#include "support/child_process.h"
#include "support/test_support.h"

namespace {

using tg::testing::ProcessResult;
using Started = tg::testing::StartedProcess;

// A command started in the background, bounded by 60 s.
Started start(const std::string& command) { return tg::testing::start_command("timeout -s KILL 60 " + command); }

ProcessResult finish(Started s) { return tg::testing::finish_command(s); }

const std::string kTgrun = TG_TGRUN_PATH;
const std::string kWorker = TG_DDP_CPU_WORKER_PATH;

void expect_parity(const ProcessResult& r, int world) {
  std::printf("%s", r.output.c_str());
  EXPECT_EQ(r.status, 0) << r.output;
  for (int rank = 0; rank < world; ++rank) {
    for (const char* mode : {"eager", "aot_eager"}) {
      for (const char* what : {"ddp", "loss"}) {
        const std::string line = "rank " + std::to_string(rank) + " " + mode + ": max |" + what +
                                 " - one process on the whole batch|";
        EXPECT_NE(r.output.find(line), std::string::npos) << "missing '" << line << "' in\n" << r.output;
      }
    }
    const std::string graph = "rank " + std::to_string(rank) + " aot_eager: ";
    EXPECT_NE(r.output.find(graph), std::string::npos) << r.output;
  }
  EXPECT_EQ(r.output.find("MISMATCH"), std::string::npos);
  EXPECT_EQ(r.output.find("MISSING"), std::string::npos);
}

// Two tgrun processes on this machine posing as two hosts of one rank each, meeting on a free port.
// Each "host" has a loopback address of its own (TG_SOCKET_ADDR: 127.0.0.2 for the master, 127.0.0.3),
// which its rank's Gloo pairs listen on; Gloo connects the pair from the higher address to the
// lower one, so rank 1 dials 127.0.0.2 (from a source address the kernel picks: 127.0.0.1 on
// loopback, another host's own address on a network). Rank 0 may know rank 1 by either address.
// The store is served at `master` (the master's own address unless told otherwise).
std::pair<Started, Started> two_hosts(const std::string& args, const std::string& env = "",
                                      const std::string& master = "127.0.0.2") {
  const std::string port = std::to_string(tg::distributed::net::find_free_port());
  auto node = [&](int node_rank) {
    return start("env " + env + " TG_SOCKET_ADDR=127.0.0." + std::to_string(node_rank + 2) + " " + kTgrun +
                 " --nnodes 2 --node-rank " + std::to_string(node_rank) + " --nproc-per-node 1 --master-addr " +
                 master + " --master-port " + port + " " + kWorker + " " + args);
  };
  Started second = node(1);  // the second host may come first: it waits for the master
  Started first = node(0);
  return {first, second};
}

TEST(DdpCpuProcesses, TwoRanksOnOneHostEqualOneProcessOnTheWholeBatch) {
  expect_parity(finish(start(kTgrun + " --nproc-per-node 2 " + kWorker + " parity")), 2);
}

void expect_two_host_parity(const std::string& master) {
  auto [first, second] = two_hosts("parity", "", master);
  ProcessResult r0 = finish(first), r1 = finish(second);
  ProcessResult both{r0.status != 0 ? r0.status : r1.status, r0.output + r1.output};
  expect_parity(both, 2);
}

TEST(DdpCpuProcesses, TwoHostsOnLoopbackEqualOneProcessOnTheWholeBatch) { expect_two_host_parity("127.0.0.2"); }

TEST(DdpCpuProcesses, TwoHostsWithTheStoreOn127001EqualOneProcessOnTheWholeBatch) {
  // The store at 127.0.0.1, an address neither host's Gloo pairs listen on.
  expect_two_host_parity("127.0.0.1");
}

TEST(DdpCpuProcesses, RankKilledOnOneHostFailsTheOtherNamingIt) {
  auto [first, second] = two_hosts("die 3");
  ProcessResult r0 = finish(first), r1 = finish(second);
  std::printf("host 0:\n%shost 1:\n%s", r0.output.c_str(), r1.output.c_str());
  EXPECT_EQ(r1.status, 137) << r1.output;
  EXPECT_NE(r1.output.find("tgrun: rank 1 (pid"), std::string::npos) << r1.output;
  EXPECT_EQ(r0.status, 1) << r0.output;
  EXPECT_NE(r0.output.find("lost rank 1"), std::string::npos) << r0.output;
  EXPECT_LT(r0.seconds, 30.0);
}

TEST(DdpCpuProcesses, RankKilledMidStepOnOneHostFailsTheOtherNamingIt) {
  // Killed by a timer rather than at a step boundary: wherever rank 0 is then (inside Gloo's
  // transfers or in the headers that open a collective), the lost connection names rank 1, at once
  // or, where Gloo only notices it at the timeout (a transfer with rank 1 under way), after 5 s.
  // Run it repeatedly (--gtest_repeat) to meet every case: which address names rank 1 is a race.
  auto [first, second] = two_hosts("die-after 300", "TG_TEST_TIMEOUT_MS=5000");
  ProcessResult r0 = finish(first), r1 = finish(second);
  std::printf("host 0:\n%shost 1:\n%s", r0.output.c_str(), r1.output.c_str());
  EXPECT_EQ(r1.status, 137) << r1.output;
  EXPECT_NE(r1.output.find("rank 1: killed 300 ms into training"), std::string::npos) << r1.output;
  EXPECT_EQ(r0.status, 1) << r0.output;
  EXPECT_NE(r0.output.find("ddp_cpu_worker: [distributed] rank 0: all_reduce #"), std::string::npos) << r0.output;
  EXPECT_NE(r0.output.find("lost rank 1"), std::string::npos) << r0.output;
  EXPECT_LT(r0.seconds, 20.0);
}

// Rank 1 stops calling collectives at step 3 (it sleeps for a minute); with a 3 s timeout rank 0
// fails in its next collective naming it, and tgrun stops rank 1: every rank exits within seconds.
void expect_named_hang(const std::string& mode) {
  const ProcessResult r =
      finish(start("env TG_TEST_TIMEOUT_MS=3000 " + kTgrun + " --nproc-per-node 2 " + kWorker + " hang 3 " + mode));
  std::printf("%s", r.output.c_str());
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_LT(r.seconds, 20.0) << r.output;  // 3 s of timeout, start-up and the stop; not the minute of sleep
  EXPECT_NE(r.output.find("rank 1: stops calling collectives at step 3"), std::string::npos) << r.output;
  // The first bucket of the step (buckets go out in order), at step 3, waiting for rank 1.
  for (const char* part : {"rank 0: all_reduce #", " (DDP bucket 0 of 3, step 3) timed out after 3 s waiting for data "
                           "from rank 1", "tgrun: rank 0 (pid"})
    EXPECT_NE(r.output.find(part), std::string::npos) << "missing '" << part << "' in\n" << r.output;
  EXPECT_NE(r.output.find("exited with code 1; stopping the other ranks"), std::string::npos) << r.output;
}

TEST(DdpCpuProcesses, RankThatStopsCallingCollectivesIsNamedEagerly) { expect_named_hang("eager"); }

TEST(DdpCpuProcesses, RankThatStopsCallingCollectivesIsNamedInACompiledBackward) { expect_named_hang("aot_eager"); }

}  // namespace
