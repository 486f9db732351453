// Soak: 10,000 compiled mlp_small training steps (forward, backward and optimizer replayed as CUDA
// graphs). After warm-up the CUDA graph pool's reserved bytes and live blocks stay exactly flat and
// the process's resident host memory grows by less than a small tolerance. Skipped without a GPU.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <fstream>

#include "bench/support/workloads.h"
#include "graphs/cudagraphs/graph_recorder.h"
#include "support/test_support.h"
#include "tapegraph.h"
#include "tensor/cuda_runtime.h"
#include "tensor/memory/cuda_memory.h"

namespace tg {
namespace {

constexpr int kWarmupSteps = 200;
constexpr int kSteps = 10000;
constexpr int kSampleEvery = 1000;
constexpr int64_t kRssToleranceBytes = 2 << 20;

// Resident set size of this process, from /proc/self/statm (pages).
int64_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  int64_t total_pages = 0, resident_pages = 0;
  statm >> total_pages >> resident_pages;
  return resident_pages * static_cast<int64_t>(sysconf(_SC_PAGESIZE));
}

TEST(Soak, CompiledMlpSmallTrainingIsFlat) {
  TG_REQUIRE_CUDA();
  const Device dev = cuda_device();
  bench::MlpSetup setup(bench::kMlpSmall, dev);
  mark_static_address(setup.x);
  mark_static_address(setup.y);
  auto f = compile([s = &setup](const Tensor& xs, const Tensor& ys) { return s->loss(xs, ys); },
                   CompileOptions{.backend = "cudagraphs"});
  optim::CompiledStep compiled_step(*setup.sgd);
  Tensor loss;
  auto step = [&] {
    loss = f(setup.x, setup.y);
    setup.sgd->zero_grad();
    loss.backward();
    compiled_step.step();
  };

  for (int i = 0; i < kWarmupSteps; ++i) step();
  const float first_loss = loss.item<float>();
  cuda::synchronize(dev.index);
  const cuda::MempoolId pool = graphs::cudagraph_mempool(dev);
  const cuda::MemoryStats base = cuda::mempool_stats(pool, dev.index);
  const int64_t base_device_reserved = cuda::memory_reserved(dev.index);
  const int64_t base_rss = resident_bytes();
  const int base_captures = f.counters().graphs_captured;
  EXPECT_GT(base.reserved_bytes, 0);

  for (int i = 1; i <= kSteps; ++i) {
    step();
    if (i % kSampleEvery != 0) continue;
    cuda::synchronize(dev.index);
    const cuda::MemoryStats now = cuda::mempool_stats(pool, dev.index);
    EXPECT_EQ(now.reserved_bytes, base.reserved_bytes) << "graph pool grew by step " << i;
    EXPECT_EQ(now.live_blocks, base.live_blocks) << "graph pool blocks changed by step " << i;
    EXPECT_EQ(cuda::memory_reserved(dev.index), base_device_reserved) << "device memory grew by step " << i;
  }
  const int64_t rss_growth = resident_bytes() - base_rss;
  std::printf("soak: %d steps, pool reserved %lld B, live blocks %lld, host RSS growth %lld B\n", kSteps,
              static_cast<long long>(base.reserved_bytes), static_cast<long long>(base.live_blocks),
              static_cast<long long>(rss_growth));
  EXPECT_LT(rss_growth, kRssToleranceBytes) << "host memory grew by " << rss_growth << " bytes";
  EXPECT_EQ(f.counters().graphs_captured, base_captures) << "steady state recorded new graphs";
  EXPECT_GT(f.counters().replays, kSteps);
  const float last_loss = loss.item<float>();
  EXPECT_TRUE(std::isfinite(last_loss));
  EXPECT_LT(last_loss, first_loss);  // it trained
}

}  // namespace
}  // namespace tg
