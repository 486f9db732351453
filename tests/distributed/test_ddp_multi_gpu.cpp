// DistributedDataParallel on two GPUs, two processes started by tgrun (skipped with fewer GPUs):
// parameters equal a one-GPU run on the whole batch, eagerly and under cudagraphs with the bucket
// reductions inside the captured backward, reduce_dtype both ways, and a rank that dies stops the
// other with its name; a rank that stops calling collectives makes the other's watchdog name what it
// waited in (the collective, or the replayed CUDA graph and the last step whose replay completed),
// and every rank exits.
#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <string>

#include "support/child_process.h"
#include "support/test_support.h"

namespace {

using tg::testing::ProcessResult;
using tg::testing::run_command;

const std::string kLaunch = std::string(TG_TGRUN_PATH) + " --nproc-per-node 2 " + TG_DDP_WORKER_PATH;

#define TG_REQUIRE_TWO_GPUS()                                                       \
  do {                                                                              \
    if (::tg::cuda_device_count() < 2) GTEST_SKIP() << "needs two CUDA devices"; \
  } while (0)

TEST(DdpTwoGpus, ParametersEqualOneGpuOnTheWholeBatch) {
  TG_REQUIRE_TWO_GPUS();
  const ProcessResult r = run_command("NCCL_NVLS_ENABLE=0 " + kLaunch + " parity");
  std::printf("%s", r.output.c_str());
  EXPECT_EQ(r.status, 0) << r.output;
  for (const char* line : {"rank 0 eager: max", "rank 1 eager: max", "rank 0 cudagraphs: max", "rank 1 cudagraphs: max",
                           "rank 0 cudagraphs: 1 bucket all-reduce(s) in the backward graph"})
    EXPECT_NE(r.output.find(line), std::string::npos) << "missing '" << line << "' in\n" << r.output;
  EXPECT_EQ(r.output.find("MISMATCH"), std::string::npos);
  EXPECT_EQ(r.output.find("NOT CAPTURED"), std::string::npos);
}

TEST(DdpTwoGpus, ReduceDtypeAveragesInTheReduceDtype) {
  // reduce_dtype both ways over NCCL, eager and under cudagraphs (bucket_cast waits for NCCL before
  // converting back), against the float64 average of both ranks' local gradients.
  TG_REQUIRE_TWO_GPUS();
  const ProcessResult r = run_command("NCCL_NVLS_ENABLE=0 " + kLaunch + " reduce_dtype");
  std::printf("%s", r.output.c_str());
  EXPECT_EQ(r.status, 0) << r.output;
  for (const char* line :
       {"rank 0 eager float32 reduced in bfloat16: worst", "rank 1 cudagraphs float32 reduced in bfloat16: worst",
        "rank 0 cudagraphs bfloat16 reduced in float32: worst", "rank 1 eager bfloat16 reduced in float32: worst"})
    EXPECT_NE(r.output.find(line), std::string::npos) << "missing '" << line << "' in\n" << r.output;
  EXPECT_EQ(r.output.find("MISMATCH"), std::string::npos);
}

TEST(DdpTwoGpus, KillingOneRankStopsTheOtherNamingIt) {
  TG_REQUIRE_TWO_GPUS();
  const ProcessResult r = run_command("NCCL_NVLS_ENABLE=0 " + kLaunch + " die 5");
  std::printf("%s", r.output.c_str());
  EXPECT_NE(r.status, 0);
  EXPECT_LT(r.seconds, 60.0);
  EXPECT_NE(r.output.find("rank 1"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("killed by signal 9"), std::string::npos) << r.output;
}

// Rank 1 sleeps at step 3 instead of calling collectives; with a 5 s timeout (above the ranks' skew
// while they compile and record) rank 0's watchdog names what it waits in and exits, and tgrun stops
// rank 1, well before the minute of sleep ends.
ProcessResult run_hang(const std::string& mode) {
  const ProcessResult r = run_command("env NCCL_NVLS_ENABLE=0 TG_TEST_TIMEOUT_MS=5000 timeout -s KILL 90 " + kLaunch +
                                      " hang 3 " + mode);
  std::printf("%s", r.output.c_str());
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_LT(r.seconds, 40.0) << r.output;  // start-up, three steps, 5 s of timeout and the stop
  for (const char* part : {"rank 1: stops calling collectives at step 3", "[distributed] rank 0 waited 5.0 s ",
                           "aborting the communicator and exiting", "tgrun: rank 0 (pid"})
    EXPECT_NE(r.output.find(part), std::string::npos) << "missing '" << part << "' in\n" << r.output;
  return r;
}

TEST(DdpTwoGpus, RankThatStopsCallingCollectivesIsNamedEagerly) {
  TG_REQUIRE_TWO_GPUS();
  // The buckets go out in order: rank 0 waits in the first of step 3 (6 broadcasts, then 3 per step).
  const ProcessResult r = run_hang("eager");
  EXPECT_NE(r.output.find("rank 0 waited 5.0 s in all_reduce_into #16 (DDP bucket 0 of 3, step 3)"),
            std::string::npos) << r.output;
}

TEST(DdpTwoGpus, RankThatStopsCallingCollectivesIsNamedInsideAReplayedGraph) {
  TG_REQUIRE_TWO_GPUS();
  // Step 0 warms the backward graph up (eager collectives #7-#9), step 1 records and replays it; the
  // replay of step 3 holds collectives #16-#18 and never completes.
  const ProcessResult r = run_hang("cudagraphs");
  for (const char* part : {"rank 0 waited 5.0 s inside a replayed CUDA graph (function ",
                           "backward graph, holding all_reduce_into #16 for DDP bucket 0 of 3, all_reduce_into #17 for "
                           "DDP bucket 1 of 3, all_reduce_into #18 for DDP bucket 2 of 3), step 3; the last step whose "
                           "replay completed: 2"})
    EXPECT_NE(r.output.find(part), std::string::npos) << "missing '" << part << "' in\n" << r.output;
}

}  // namespace
