// DistributedDataParallel on two GPUs, two processes started by tgrun (skipped with fewer GPUs):
// parameters equal a one-GPU run on the whole batch, eagerly and under cudagraphs with the bucket
// reductions inside the captured backward, reduce_dtype both ways, and a rank that dies stops the
// other with its name.
#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <string>

#include "support/test_support.h"

namespace {

struct ProcessResult {
  int status = -1;
  std::string output;
  double seconds = 0;
};

ProcessResult run_command(const std::string& command) {
  ProcessResult r;
  const auto start = std::chrono::steady_clock::now();
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (!pipe) return r;
  std::array<char, 4096> buffer{};
  while (fgets(buffer.data(), static_cast<int>(buffer.size()), pipe)) r.output += buffer.data();
  const int status = pclose(pipe);
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

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

}  // namespace
