// The shared CUDA graph pool on a GPU (skipped without one): every recording of a device allocates
// from one private pool, output memory goes back to it when the outputs die, a replay takes its
// memory back from other graphs' stale outputs, and never from outputs still needed in this step.
#include <gtest/gtest.h>

#include "graphs/compile.h"
#include "graphs/cudagraphs/graph_recorder.h"
#include "graphs/runtime/cudagraph_step.h"
#include "support/test_support.h"
#include "tensor/cuda_runtime.h"
#include "tensor/memory/cuda_memory.h"

namespace tg {
namespace {

using testing::expect_close;

const CompileOptions kCudagraphs{.backend = "cudagraphs"};
constexpr int64_t kBig = 1 << 20;  // floats: 4 MiB buffers, carved from the pool's large segments
// Compiled graphs fuse x * a + b into one kernel that may round once (an FMA) where eager rounds twice.
constexpr double kRtol = 1e-5, kAtol = 1e-6;

Tensor cuda_randn(const Shape& s) { return randn(s, {.device = cuda_device()}); }

cuda::MempoolId pool() { return graphs::cudagraph_mempool(cuda_device()); }

// True when the tensor's memory was handed out from the CUDA graph pool.
bool in_pool(const Tensor& t) {
  return cuda::mempool_range_in_use(pool(), t.impl()->storage()->data(), static_cast<size_t>(t.impl()->storage()->nbytes()));
}

TEST(CudagraphPool, ForwardBackwardAndOtherFunctionsShareOnePool) {
  TG_REQUIRE_CUDA();
  Tensor w = cuda_randn({64, 32}).requires_grad_(true);
  auto f = compile([&w](const Tensor& x) { return x.mm(w).tanh().sum(); }, kCudagraphs);
  auto g = compile([](const Tensor& x) { return x.exp() * 2; }, kCudagraphs);
  Tensor x = cuda_randn({16, 64});
  for (int i = 0; i < 2; ++i) {  // warm-up, then recording
    w.set_grad(Tensor());
    f(x).backward();
  }
  Tensor loss = f(x);
  EXPECT_TRUE(in_pool(loss));  // forward graph output
  w.set_grad(Tensor());
  loss.backward();
  EXPECT_TRUE(in_pool(w.grad()));  // backward graph output, taken by the gradient
  g(x);
  Tensor y = g(x);
  EXPECT_TRUE(in_pool(y));  // another compiled function
  EXPECT_EQ(f.counters().graphs_captured, 2);
  EXPECT_EQ(g.counters().graphs_captured, 1);
  EXPECT_GT(cuda::mempool_stats(pool()).live_blocks, 0);
}

TEST(CudagraphPool, LiveBlocksFallWhenOutputsDie) {
  TG_REQUIRE_CUDA();
  auto f = compile([](const Tensor& x) { return std::make_tuple(x.exp(), x.sin()); }, kCudagraphs);
  Tensor x = cuda_randn({kBig});
  f(x);
  auto [a, b] = f(x);
  const cuda::MemoryStats held = cuda::mempool_stats(pool());
  a = Tensor();
  EXPECT_EQ(cuda::mempool_stats(pool()).live_blocks, held.live_blocks - 1);
  b = Tensor();
  const cuda::MemoryStats freed = cuda::mempool_stats(pool());
  EXPECT_EQ(freed.live_blocks, held.live_blocks - 2);
  EXPECT_EQ(freed.allocated_bytes, held.allocated_bytes - 2 * kBig * 4);
  // The next replay claims the same memory back, without recording again.
  auto [a2, b2] = f(x);
  EXPECT_EQ(cuda::mempool_stats(pool()).live_blocks, held.live_blocks);
  EXPECT_EQ(cuda::mempool_stats(pool()).reserved_bytes, held.reserved_bytes);
  expect_close(a2, x.exp(), 1e-5, 1e-6);
  expect_close(b2, x.sin(), 1e-5, 1e-6);
  EXPECT_EQ(f.counters().graphs_captured, 1);
}

// A recording frees each intermediate after its last reader, as eager execution does, so a chain
// of elementwise ops needs a few buffers while it is captured, not one per op.
TEST(CudagraphPool, ARecordingReusesTheMemoryOfDeadIntermediates) {
  TG_REQUIRE_CUDA();
  constexpr int kOps = 8;
  auto chain = [](const Tensor& x) {
    Tensor y = x;
    for (int i = 0; i < kOps; ++i) y = (y * 0.5).sin();
    return y;
  };
  auto f = compile(chain, kCudagraphs);
  Tensor x = cuda_randn({kBig});
  f(x);  // warm-up
  cuda::synchronize();
  const int64_t before = cuda::memory_allocated();
  cuda::reset_peak_memory_stats();
  Tensor y = f(x);  // recorded here
  ASSERT_EQ(f.counters().graphs_captured, 1);
  const int64_t buffer_bytes = kBig * 4;
  EXPECT_LE(cuda::max_memory_allocated() - before, 4 * buffer_bytes)
      << "a recording of " << 2 * kOps << " elementwise ops held more than four 4 MiB buffers at once";
  expect_close(y, chain(x), 1e-5, 1e-6);
  expect_close(f(x), chain(x), 1e-5, 1e-6);  // replayed
}

TEST(CudagraphPool, ReplayTakesMemoryBackFromAnotherGraphsEarlierOutput) {
  TG_REQUIRE_CUDA();
  auto first = compile([](const Tensor& x) { return x * 2 + 1; }, kCudagraphs);
  auto second = compile([](const Tensor& x) { return x * 3 - 1; }, kCudagraphs);
  Tensor x = cuda_randn({kBig});
  first(x);
  first(x);  // recorded; its output died at once
  const int64_t reserved = cuda::mempool_stats(pool()).reserved_bytes;
  second(x);
  Tensor kept = second(x);  // recorded into the memory the first graph's output had
  EXPECT_EQ(cuda::mempool_stats(pool()).reserved_bytes, reserved);
  expect_close(kept, x * 3 - 1, kRtol, kAtol);
  mark_step_begin();
  Tensor again = first(x);  // overwrites `kept` (an earlier step's output) instead of recording again
  expect_close(again, x * 2 + 1, kRtol, kAtol);
  EXPECT_EQ(first.counters().graphs_captured, 1);
  EXPECT_THROW_MSG(kept.cpu(), "overwritten");
}

TEST(CudagraphPool, OutputsNeededInThisStepAreNeverOverwritten) {
  TG_REQUIRE_CUDA();
  auto first = compile([](const Tensor& x) { return x * 2 + 1; }, kCudagraphs);
  auto second = compile([](const Tensor& x) { return x * 3 - 1; }, kCudagraphs);
  Tensor w = cuda_randn({8}).requires_grad_(true);
  auto pending = compile([&w](const Tensor& v) { return (v * w).sum(); }, kCudagraphs);
  Tensor x = cuda_randn({kBig});
  first(x);
  first(x);
  second(x);
  Tensor probe = second(x);  // recorded over the memory of first's output, as in the test above
  first(x);
  EXPECT_THROW_MSG(probe.cpu(), "overwritten");
  // A backward is pending, so the step stays open: first's output is needed and second must not
  // overwrite it, so it records another instance.
  Tensor loss = pending(cuda_randn({8}));
  Tensor kept = first(x);
  Tensor other = second(x);
  EXPECT_EQ(second.counters().rerecords, 1);
  expect_close(kept, x * 2 + 1, kRtol, kAtol);
  expect_close(other, x * 3 - 1, kRtol, kAtol);
  loss.backward();
}

TEST(CudagraphPool, GradientsStayCorrectWhenOtherGraphsRunBeforeBackward) {
  TG_REQUIRE_CUDA();
  Tensor w = cuda_randn({kBig}).requires_grad_(true);
  Tensor w_eager = w.detach().clone().requires_grad_(true);
  auto f = compile([&w](const Tensor& x) { return (x * w).exp().sum(); }, kCudagraphs);
  auto g = compile([](const Tensor& y) { return y * 3 + 1; }, kCudagraphs);
  Tensor x = cuda_randn({kBig}) * 0.1;
  Tensor y = cuda_randn({kBig});
  for (int i = 0; i < 2; ++i) f(x).backward();  // recorded; the saved activations died with backward
  g(y);
  g(y);  // recorded while f held no memory
  for (int i = 0; i < 3; ++i) {
    w.set_grad(Tensor());
    w_eager.set_grad(Tensor());
    Tensor loss = f(x);  // activations pending for backward
    Tensor out = g(y);
    expect_close(out, y * 3 + 1, kRtol, kAtol);
    loss.backward();
    (x * w_eager).exp().sum().backward();
    expect_close(w.grad(), w_eager.grad(), 1e-4, 1e-5);
  }
}

}  // namespace
}  // namespace tg
