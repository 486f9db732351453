// ZeroRedundancyOptimizer in separate processes started by tgrun: two ranks on two GPUs (NCCL), or on
// the CPU backend where the machine has no GPU (skipped with exactly one). Stages 1 and 2, eager and
// compiled, equal DistributedDataParallel; a checkpoint saved by two ranks resumes on one and on two
// with the losses of the uninterrupted run; a rank that stops calling collectives is named by the
// other with the reduce-scatter bucket and step it waited in.
#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <random>
#include <sstream>
#include <string>

#include "support/child_process.h"
#include "support/test_support.h"

namespace {

namespace fs = std::filesystem;

using tg::testing::ProcessResult;
using tg::testing::run_command;

std::string launch(int nproc) {
  return "NCCL_NVLS_ENABLE=0 " + std::string(TG_TGRUN_PATH) + " --nproc-per-node " + std::to_string(nproc) + " " +
         TG_ZERO_WORKER_PATH;
}

#define TG_REQUIRE_TWO_GPUS_OR_NONE()                                                                   \
  do {                                                                                                  \
    if (::tg::cuda_device_count() == 1) GTEST_SKIP() << "one CUDA device: two ranks need two (or none)"; \
  } while (0)

// The "zero-loss STEP VALUE" lines of a run, by step.
std::map<int, double> losses_of(const std::string& output) {
  std::map<int, double> out;
  std::istringstream in(output);
  std::string line;
  while (std::getline(in, line)) {
    const size_t at = line.find("zero-loss ");
    if (at == std::string::npos) continue;
    int step = 0;
    double value = 0;
    if (std::sscanf(line.c_str() + at, "zero-loss %d %lf", &step, &value) == 2) out[step] = value;
  }
  return out;
}

TEST(ZeroProcesses, TwoRanksMatchDistributedDataParallel) {
  TG_REQUIRE_TWO_GPUS_OR_NONE();
  const ProcessResult r = run_command(launch(2) + " parity");
  std::printf("%s", r.output.c_str());
  EXPECT_EQ(r.status, 0) << r.output;
  for (const char* line : {"rank 0 stage 1 eager: max", "rank 1 stage 2 eager: max", "rank 1 stage 1 ",
                           "rank 0 stage 2 "})
    EXPECT_NE(r.output.find(line), std::string::npos) << "missing '" << line << "' in\n" << r.output;
  EXPECT_EQ(r.output.find("MISMATCH"), std::string::npos);
  EXPECT_EQ(r.output.find("RECOMPILED"), std::string::npos);
}

TEST(ZeroProcesses, CheckpointOfTwoRanksResumesOnOneAndTwo) {
  TG_REQUIRE_TWO_GPUS_OR_NONE();
  for (int stage : {1, 2}) {
    const fs::path dir = fs::temp_directory_path() / ("tg_zero_processes_" + std::to_string(std::random_device{}()));
    fs::create_directories(dir);
    const ProcessResult saved = run_command(launch(2) + " save " + dir.string() + " " + std::to_string(stage));
    ASSERT_EQ(saved.status, 0) << saved.output;
    const std::map<int, double> expected = losses_of(saved.output);
    ASSERT_EQ(expected.size(), 10u) << saved.output;
    for (int nproc : {1, 2}) {
      const ProcessResult resumed =
          run_command(launch(nproc) + " resume " + dir.string() + " " + std::to_string(3 - stage));
      ASSERT_EQ(resumed.status, 0) << resumed.output;
      const std::map<int, double> got = losses_of(resumed.output);
      ASSERT_EQ(got.size(), expected.size()) << resumed.output;
      for (const auto& [step, loss] : expected)
        EXPECT_NEAR(got.at(step), loss, 1e-5 * std::abs(loss)) << "stage " << stage << ", " << nproc
                                                                << " rank(s), step " << step;
    }
    fs::remove_all(dir);
  }
}

// Rank 1 sleeps at step 3; with a 5 s timeout rank 0 fails in the step's first gradient
// reduce-scatter (NCCL's watchdog, or the CPU backend's timeout), and tgrun stops rank 1.
TEST(ZeroProcesses, RankThatStopsCallingCollectivesIsNamedWithItsBucket) {
  TG_REQUIRE_TWO_GPUS_OR_NONE();
  const auto start = std::chrono::steady_clock::now();
  const ProcessResult r = run_command("timeout -s KILL 90 env TG_TEST_TIMEOUT_MS=5000 " + launch(2) + " hang 3");
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("%s", r.output.c_str());
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_LT(seconds, 40.0) << r.output;
  for (const char* part : {"rank 1: stops calling collectives at step 3", "reduce_scatter #",
                           " (ZeRO reduce-scatter, group 0 bucket ", ", step 3)", "tgrun: rank 0 (pid"})
    EXPECT_NE(r.output.find(part), std::string::npos) << "missing '" << part << "' in\n" << r.output;
}

}  // namespace
