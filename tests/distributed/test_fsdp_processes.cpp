// fully_shard in separate processes started by tgrun: two ranks on two GPUs (NCCL), or on the CPU
// backend where the machine has no GPU (skipped with exactly one). A small GPT sharded per block
// equals DistributedDataParallel (with and without checkpointing), eagerly and with its loss under
// compile() (aot_eager on the CPU, cudagraphs on GPUs; compiled once, never recompiled nor run eagerly),
// and the bytes a rank keeps for parameters, gradients and optimizer state are at most 0.55 of DDP's
// (GPT-2 small on GPUs).
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

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

// Runs `fsdp_worker mode` on two ranks: it exits 0, prints each of `lines` and no mismatch. Returns
// what it printed.
std::string expect_worker_passes(const std::string& mode, const std::vector<std::string>& lines) {
  const ProcessResult r = run_command(launch(2) + " " + mode);
  std::printf("%s", r.output.c_str());
  EXPECT_EQ(r.status, 0) << r.output;
  for (const std::string& line : lines)
    EXPECT_NE(r.output.find(line), std::string::npos) << "missing '" << line << "' in\n" << r.output;
  EXPECT_EQ(r.output.find("MISMATCH"), std::string::npos);
  return r.output;
}

size_t count_of(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + part.size())) ++n;
  return n;
}

// Each rank's line for the plain and the checkpointed GPT of a run the worker calls `label`.
std::vector<std::string> parity_lines(const std::string& label) {
  std::vector<std::string> lines;
  for (const char* gpt : {"plain", "checkpointed"})
    for (int rank : {0, 1}) lines.push_back("rank " + std::to_string(rank) + " " + label + " " + gpt + ": ");
  return lines;
}

TEST(FsdpProcesses, TwoRanksMatchDistributedDataParallel) {
  TG_REQUIRE_TWO_GPUS_OR_NONE();
  expect_worker_passes("parity", parity_lines("fsdp"));
}

TEST(FsdpProcesses, CompiledTwoRanksMatchDistributedDataParallel) {
  // Each rank's step compiles once and serves all 5 steps, plain and checkpointed, with a gather and a
  // reduce-scatter per unit (3 blocks and the root) in its graphs.
  TG_REQUIRE_TWO_GPUS_OR_NONE();
  const std::string backend = ::tg::cuda_device_count() >= 2 ? "cudagraphs" : "aot_eager";
  const std::string output = expect_worker_passes("compiled", parity_lines("compiled (" + backend + ") fsdp"));
  EXPECT_EQ(count_of(output, "1 compilation(s), 0 recompile(s), 0 eager fallback(s), 5 compiled call(s), "
                             "4 gather(s) and 4 reduce-scatter(s) in the graphs: ok"),
            4u)
      << output;
}

TEST(FsdpProcesses, KeepsAtMostFiftyFivePercentOfDdpMemory) {
  TG_REQUIRE_TWO_GPUS_OR_NONE();
  expect_worker_passes("memory", {"rank 0 fsdp-memory: ", "rank 1 fsdp-memory: "});
}

}  // namespace
