// C++ ports of PyTorch's test/dynamo/test_cudagraphs.py (the seed): each case runs N_ITERS = 5
// iterations with backend cudagraphs, checks values and grads against eager, and checks through the
// counters how much ran inside CUDA graphs (DESIGN.md §8). Skipped without a GPU.
#include <gtest/gtest.h>

#include "graphs/compile.h"
#include "support/test_support.h"

namespace tg {
namespace {

using testing::expect_close;

constexpr int kIters = 5;
const CompileOptions kCudagraphs{.backend = "cudagraphs"};

bool any_skip_contains(const graphs::CompileCounters& c, const std::string& what) {
  for (const auto& [reason, n] : c.cudagraph_skips)
    if (reason.find(what) != std::string::npos) return true;
  return false;
}

// Runs loss = f(x, y); loss.backward() kIters times, compiled and eagerly on copies, and compares.
template <typename Model>
graphs::CompileCounters run_loss_case(Model model, const Tensor& x, const Tensor& y) {
  auto compiled = compile([model](const Tensor& a, const Tensor& b) { return model(a, b).sum(); }, kCudagraphs);
  Tensor xe = x.detach().clone().requires_grad_(x.requires_grad()), ye = y.detach().clone();
  Tensor xc = x.detach().clone().requires_grad_(x.requires_grad()), yc = y.detach().clone();
  for (int i = 0; i < kIters; ++i) {
    Tensor le = model(xe, ye).sum();
    Tensor lc = compiled(xc, yc);
    expect_close(lc, le, 1e-5, 1e-6);
    le.backward();
    lc.backward();
    if (xe.requires_grad()) expect_close(xc.grad(), xe.grad(), 1e-5, 1e-6);
    expect_close(yc, ye);
  }
  return compiled.counters();
}

// Seed: test_basic.
TEST(CudagraphsSeed, test_basic) {
  TG_REQUIRE_CUDA();
  auto model = [](const Tensor& x, const Tensor& y) { return (x + y) * y; };
  auto c = run_loss_case(model, randn({3}, {.device = cuda_device()}).requires_grad_(true), randn({3}, {.device = cuda_device()}));
  EXPECT_GE(c.graphs_captured, 2);  // forward and backward
  EXPECT_EQ(c.eager_nodes, 0);
  EXPECT_GT(c.replays, 0);
}

// Seed: test_dtoh: the CUDA part stays graphed, the CPU part runs as an island.
TEST(CudagraphsSeed, test_dtoh) {
  TG_REQUIRE_CUDA();
  auto model = [](const Tensor& x, const Tensor& y) { return (x + y).cpu() * 3; };
  auto c = run_loss_case(model, randn({3}, {.device = cuda_device()}).requires_grad_(true), randn({3}, {.device = cuda_device()}));
  EXPECT_GE(c.graphs_captured, 1);
  EXPECT_GT(c.captured_nodes, 0);
  EXPECT_TRUE(any_skip_contains(c, "cpu device"));
}

// Seed: test_htod: y is a CPU 0-dim tensor, staged to the device; a new value is honoured.
TEST(CudagraphsSeed, test_htod) {
  TG_REQUIRE_CUDA();
  auto model = [](const Tensor& x, const Tensor& y) { return (x + y) * 3; };
  auto c = run_loss_case(model, randn({3}, {.device = cuda_device()}).requires_grad_(true), randn({}));
  EXPECT_FALSE(any_skip_contains(c, "cpu device"));
  EXPECT_GE(c.graphs_captured, 2);
  auto compiled = compile([model](const Tensor& a, const Tensor& b) { return model(a, b); }, kCudagraphs);
  Tensor x = randn({3}, {.device = cuda_device()});
  for (int i = 0; i < kIters; ++i) {
    Tensor y = scalar_tensor(static_cast<float>(i));
    expect_close(compiled(x, y), (x + y) * 3);
  }
}

// Seed: test_mutate_input: the caller sees exactly +3 per call, warm-up and recording included.
TEST(CudagraphsSeed, test_mutate_input) {
  TG_REQUIRE_CUDA();
  auto model = [](const Tensor& x, const Tensor& y) {
    Tensor yy = y;
    yy.add_(3);
    return x * yy;
  };
  auto compiled = compile([model](const Tensor& a, const Tensor& b) { return model(a, b).sum(); }, kCudagraphs);
  Tensor x = randn({3}, {.device = cuda_device()}).requires_grad_(true);
  Tensor y = randn({3}, {.device = cuda_device()});
  for (int i = 0; i < kIters; ++i) {
    Tensor y_orig = y.clone();
    Tensor loss = compiled(x, y);
    expect_close(y, y_orig + 3);
    expect_close(loss, (x.detach() * y).sum(), 1e-5, 1e-5);
    loss.backward();
  }
  EXPECT_GE(compiled.counters().graphs_captured, 2);
  EXPECT_FALSE(any_skip_contains(compiled.counters(), "cpu device"));
}

// Seed: test_mutate_constant: a CPU constant made and mutated inside is folded, then graphed.
TEST(CudagraphsSeed, test_mutate_constant) {
  TG_REQUIRE_CUDA();
  auto model = [](const Tensor& x, const Tensor& y) {
    Tensor c = scalar_tensor(int64_t{1});
    c.add_(2);
    return x * y * 0 + c;
  };
  auto compiled = compile([model](const Tensor& a, const Tensor& b) { return model(a, b).sum(); }, kCudagraphs);
  Tensor x = randn({1}, {.device = cuda_device()}).requires_grad_(true);
  Tensor y = randn({1}, {.device = cuda_device()});
  for (int i = 0; i < kIters; ++i) {
    Tensor loss = compiled(x, y);
    EXPECT_FLOAT_EQ(loss.item<float>(), 3.0f);
    EXPECT_TRUE(loss.is_cuda());
    loss.backward();
  }
  EXPECT_FALSE(any_skip_contains(compiled.counters(), "cpu device"));
  EXPECT_GE(compiled.counters().graphs_captured, 2);
}

// Seed: test_factory: zeros on the device inside the function.
TEST(CudagraphsSeed, test_factory) {
  TG_REQUIRE_CUDA();
  auto model = [](const Tensor& y) {
    Tensor x = zeros({3}, {.device = cuda_device()});
    x.add_(3);
    return x * y;
  };
  auto compiled = compile([model](const Tensor& y) { return model(y).sum(); }, kCudagraphs);
  Tensor y = randn({3}, {.device = cuda_device()}).requires_grad_(true);
  for (int i = 0; i < kIters; ++i) compiled(y).backward();
  expect_close(y.grad(), full({3}, 3.0f * kIters, {.device = cuda_device()}));
  EXPECT_EQ(compiled.counters().eager_nodes, 0);
  EXPECT_GE(compiled.counters().graphs_captured, 2);
}

// Seed: test_mutated_metadata: resize_ of a fresh clone, then fill_; graphed.
TEST(CudagraphsSeed, test_mutated_metadata) {
  TG_REQUIRE_CUDA();
  auto model = [](const Tensor& x) {
    Tensor c = x.clone();
    c.resize_({20});
    c.fill_(2);
    return c;
  };
  auto compiled = compile(model, kCudagraphs);
  Tensor x = empty({0}, {.device = cuda_device()});
  for (int i = 0; i < kIters; ++i) expect_close(compiled(x), full({20}, 2.0f, {.device = cuda_device()}));
  EXPECT_EQ(compiled.counters().eager_nodes, 0);
  EXPECT_GE(compiled.counters().graphs_captured, 1);
}

// Seed: test_dead_fill: fills of a zero-element view; the view keeps aliasing its base.
TEST(CudagraphsSeed, test_dead_fill) {
  TG_REQUIRE_CUDA();
  auto model = [](const Tensor& x) {
    Tensor c = x.clone();
    Tensor y = c.slice(0, 0, 0);
    c.fill_(2);
    y.fill_(3);
    return std::tuple<Tensor, Tensor>{c, y};
  };
  auto compiled = compile(model, kCudagraphs);
  // The seed uses torch.empty; the clone would then read never-written memory (initcheck errors).
  Tensor x = randn({20}, {.device = cuda_device()});
  for (int i = 0; i < kIters; ++i) {
    auto [rx, ry] = compiled(x);
    expect_close(rx, full({20}, 2.0f, {.device = cuda_device()}));
    EXPECT_EQ(ry.numel(), 0);
    EXPECT_EQ(ry.impl()->storage(), rx.impl()->storage());
  }
  EXPECT_EQ(compiled.counters().eager_nodes, 0);
}

}  // namespace
}  // namespace tg
