// fully_shard in separate processes started by tgrun: two ranks on two GPUs (NCCL), or on the CPU
// backend where the machine has no GPU (skipped with exactly one). A small GPT sharded per block
// equals DistributedDataParallel (with and without checkpointing), and the bytes a rank keeps for
// parameters, gradients and optimizer state are at most 0.55 of DDP's (GPT-2 small on GPUs).
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <string>

#include "support/child_process.h"
#include "support/test_support.h"

namespace {

using tg::testing::ProcessResult;
using tg::testing::run_command;

std::string launch(int nproc) {
  return "NCCL_NVLS_ENABLE=0 " + std::string(TG_TGRUN_PATH) + " --nproc-per-node " + std::to_string(nproc) + " " +
         TG_FSDP_WORKER_PATH;
}

#define TG_REQUIRE_TWO_GPUS_OR_NONE()                                                                   \
  do {                                                                                                  \
    if (::tg::cuda_device_count() == 1) GTEST_SKIP() << "one CUDA device: two ranks need two (or none)"; \
  } while (0)

TEST(FsdpProcesses, TwoRanksMatchDistributedDataParallel) {
  TG_REQUIRE_TWO_GPUS_OR_NONE();
  const ProcessResult r = run_command(launch(2) + " parity");
  std::printf("%s", r.output.c_str());
  EXPECT_EQ(r.status, 0) << r.output;
  for (const char* line : {"rank 0 fsdp plain: ", "rank 1 fsdp plain: ", "rank 0 fsdp checkpointed: ",
                           "rank 1 fsdp checkpointed: "})
    EXPECT_NE(r.output.find(line), std::string::npos) << "missing '" << line << "' in\n" << r.output;
  EXPECT_EQ(r.output.find("MISMATCH"), std::string::npos);
}

TEST(FsdpProcesses, KeepsAtMostFiftyFivePercentOfDdpMemory) {
  TG_REQUIRE_TWO_GPUS_OR_NONE();
  const ProcessResult r = run_command(launch(2) + " memory");
  std::printf("%s", r.output.c_str());
  EXPECT_EQ(r.status, 0) << r.output;
  for (const char* line : {"rank 0 fsdp-memory: ", "rank 1 fsdp-memory: "})
    EXPECT_NE(r.output.find(line), std::string::npos) << "missing '" << line << "' in\n" << r.output;
  EXPECT_EQ(r.output.find("MISMATCH"), std::string::npos);
}

}  // namespace
