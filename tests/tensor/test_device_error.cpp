// Device-side bounds and target checks: CUDA index_select/index_add and nll_loss/cross_entropy
// record a bad index or target on the device without synchronizing, and the error surfaces as a
// tg::Error at the next host synchronization (a device-to-host copy, item(), cuda::synchronize()).
// Skipped without a GPU.
#include <gtest/gtest.h>

#include "graphs/compile.h"
#include "graphs/cudagraphs/graph_recorder.h"
#include "support/test_support.h"
#include "tapegraph.h"
#include "tensor/cuda_runtime.h"

namespace tg {
namespace {

using testing::expect_close;

Tensor cuda_index(std::initializer_list<int64_t> values) {
  return tensor<int64_t>(values).to(cuda_device());
}

TEST(DeviceError, NllLossTargetOutOfRangeRaisesAtItem) {
  TG_REQUIRE_CUDA();
  Tensor x = randn({4, 10}, {.device = cuda_device()});
  Tensor loss = nll_loss(x, cuda_index({1, 2, 12, 3}));  // no synchronization, no throw here
  EXPECT_THROW_MSG(loss.item<float>(), "[nll_loss] target 12 is out of range for 10 classes (at batch index 2)");
  // The error was consumed: a clean call afterwards reads normally.
  Tensor ok = nll_loss(x, cuda_index({1, 2, 9, 3}));
  EXPECT_NO_THROW(ok.item<float>());
}

TEST(DeviceError, CrossEntropyNegativeTargetRaisesAtCpu) {
  TG_REQUIRE_CUDA();
  Tensor x = randn({3, 5}, {.device = cuda_device()});
  Tensor loss = cross_entropy(x, cuda_index({0, -1, 4}), Reduction::None);
  EXPECT_THROW_MSG(loss.cpu(), "[nll_loss] target -1 is out of range for 5 classes (at batch index 1)");
  EXPECT_NO_THROW(cuda::synchronize(0));
}

TEST(DeviceError, NllLossLargeBatchReportsThroughTheReductionEngine) {
  TG_REQUIRE_CUDA();
  Tensor x = randn({70000, 3}, {.device = cuda_device()});
  Tensor t = zeros({70000}, {.dtype = kInt64, .device = cuda_device()});
  t.narrow(0, 69999, 1).fill_(7);
  Tensor loss = nll_loss(x, t, Reduction::Sum);
  EXPECT_THROW_MSG(cuda::synchronize(0), "[nll_loss] target 7 is out of range for 3 classes (at batch index 69999)");
}

TEST(DeviceError, NllLossBackwardReportsItsOwnName) {
  TG_REQUIRE_CUDA();
  Tensor x = randn({2, 4}, {.device = cuda_device()}).requires_grad_(true);
  Tensor loss = nll_loss(x, cuda_index({4, 3}));
  EXPECT_THROW_MSG(cuda::synchronize(0), "[nll_loss] target 4 is out of range for 4 classes (at batch index 0)");
  loss.backward();
  EXPECT_THROW_MSG(x.grad().cpu(), "[nll_loss_backward] target 4 is out of range for 4 classes (at batch index 0)");
}

TEST(DeviceError, IndexSelectOutOfRangeRaisesAtSynchronize) {
  TG_REQUIRE_CUDA();
  Tensor x = randn({5, 3}, {.device = cuda_device()});
  Tensor out = index_select(x, 0, cuda_index({0, 7, 2}));
  EXPECT_THROW_MSG(cuda::synchronize(0), "[index_select] index 7 is out of range for dimension 0 with size 5");
  // The bad row reads as zeros, the others as gathered.
  Tensor host = out.cpu();
  expect_close(host.select(0, 1), zeros({3}));
  expect_close(host.select(0, 2), x.cpu().select(0, 2));
}

TEST(DeviceError, IndexAddOutOfRangeRaisesAtCopyToHost) {
  TG_REQUIRE_CUDA();
  Tensor x = zeros({4, 2}, {.device = cuda_device()});
  Tensor src = ones({4, 2}, {.device = cuda_device()});
  Tensor out = index_add(x, 1, tensor<int32_t>({1, -3}).to(cuda_device()), src);
  EXPECT_THROW_MSG(out.cpu(), "[index_add] index -3 is out of range for dimension 1 with size 2");
}

TEST(DeviceError, FirstErrorWins) {
  TG_REQUIRE_CUDA();
  Tensor x = randn({5}, {.device = cuda_device()});
  Tensor a = index_select(x, 0, cuda_index({11}));
  Tensor b = nll_loss(randn({1, 2}, {.device = cuda_device()}), cuda_index({5}));
  EXPECT_THROW_MSG(b.item<float>(), "[index_select] index 11 is out of range for dimension 0 with size 5");
  EXPECT_NO_THROW(b.item<float>());  // reported once
}

TEST(DeviceError, CleanCallsLeaveNoError) {
  TG_REQUIRE_CUDA();
  Tensor x = randn({6, 4}, {.device = cuda_device()}).requires_grad_(true);
  Tensor idx = cuda_index({5, 0, 5});
  Tensor loss = cross_entropy(index_select(x, 0, idx), cuda_index({3, 0, 1}));
  loss.backward();
  EXPECT_NO_THROW(loss.item<float>());
  EXPECT_NO_THROW(x.grad().cpu());
  EXPECT_NO_THROW(cuda::synchronize(0));
}

// index_select must not synchronize: it is recorded into a CUDA graph as is, and a bad index seen
// by a replay surfaces at the next synchronization (a replay itself does not raise).
TEST(DeviceError, IndexSelectIsCapturedAndReportsFromReplays) {
  TG_REQUIRE_CUDA();
  Tensor x = randn({5, 3}, {.device = cuda_device()});
  Tensor idx = cuda_index({4, 1});
  auto recorder = graphs::cuda_graph_recorder(cuda_device());
  auto [graph, outs] = recorder->record([&] { return TensorList{index_select(x, 0, idx)}; });
  graph->replay();
  expect_close(outs[0], index_select(x, 0, idx));
  idx.copy_(tensor<int64_t>({4, 5}));
  EXPECT_NO_THROW(graph->replay());
  EXPECT_THROW_MSG(outs[0].cpu(), "[index_select] index 5 is out of range for dimension 0 with size 5");
  idx.copy_(tensor<int64_t>({2, 3}));
  graph->replay();
  expect_close(outs[0], index_select(x, 0, idx));
}

// A compiled call (warm-up, recording, replays) never synchronizes to check: the error raised at
// the caller's next read, not at the end of the call.
TEST(DeviceError, CompiledCallRaisesAtTheNextReadNotAtReplayEnd) {
  TG_REQUIRE_CUDA();
  auto f = compile([](const Tensor& x, const Tensor& t) { return cross_entropy(x * 2, t); },
                   CompileOptions{.backend = "cudagraphs"});
  Tensor x = randn({4, 6}, {.device = cuda_device()});
  Tensor t = cuda_index({0, 1, 2, 3});
  for (int i = 0; i < 3; ++i) EXPECT_NO_THROW(f(x, t).item<float>());
  EXPECT_GT(f.counters().replays, 0);
  t.copy_(tensor<int64_t>({0, 1, 6, 3}));
  Tensor loss;
  EXPECT_NO_THROW(loss = f(x, t));
  EXPECT_THROW_MSG(loss.item<float>(), "[nll_loss] target 6 is out of range for 6 classes (at batch index 2)");
  t.copy_(tensor<int64_t>({5, 1, 2, 3}));
  EXPECT_NO_THROW(f(x, t).item<float>());
}

}  // namespace
}  // namespace tg
