// linear_cross_entropy on CUDA: the same values and gradients as on the CPU (float32, float64 and
// bfloat16 autocast), captured in CUDA graphs, and bad targets reported at the next sync.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "graphs/compile.h"
#include "ops/loss/linear_cross_entropy_rows.h"
#include "support/test_support.h"
#include "tensor/cuda_runtime.h"
#include "tensor/memory/cuda_memory.h"

namespace tg {
namespace {

using testing::expect_close;
using testing::random_tensor;

// Whether a and b hold the same bytes (NaNs included), compared on the CPU.
bool same_bits(const Tensor& a, const Tensor& b) {
  const Tensor x = a.cpu().contiguous(), y = b.cpu().contiguous();
  return x.sizes() == y.sizes() && x.dtype() == y.dtype() &&
         std::memcmp(x.raw_data(), y.raw_data(), static_cast<size_t>(x.numel() * dtype_size(x.dtype()))) == 0;
}

Tensor labels(std::vector<int64_t> v) { return from_vector(v, {static_cast<int64_t>(v.size())}); }

Tensor random_targets(int64_t rows, int64_t classes, int64_t ignore_every) {
  std::vector<int64_t> v(static_cast<size_t>(rows));
  for (int64_t i = 0; i < rows; ++i)
    v[static_cast<size_t>(i)] = ignore_every > 0 && i % ignore_every == 1 ? -100 : (i * 5 + 2) % classes;
  return labels(v);
}

// The loss and the gradients w.r.t. x, w and b on `device` (returned on the CPU).
TensorList on_device(Device device, const Tensor& x0, const Tensor& w0, const Tensor& b0, const Tensor& target,
                     const LinearCrossEntropyOptions& o) {
  // Detached first: on the CPU, to() returns the tensor itself, which would make the next call's
  // copies non-leaf tensors without a .grad.
  const Tensor x = x0.detach().to(device).requires_grad_(true), w = w0.detach().to(device).requires_grad_(true);
  const Tensor b = b0.detach().to(device).requires_grad_(true);
  Tensor loss = linear_cross_entropy(x, w, b, target.to(device), o);
  if (o.reduction == Reduction::None) loss = (loss * arange(loss.numel(), {.dtype = loss.dtype(), .device = device})).sum();
  loss.backward();
  return {loss.detach().cpu(), x.grad().cpu(), w.grad().cpu(), b.grad().cpu()};
}

TEST(LinearCrossEntropyCuda, MatchesCpu) {
  TG_REQUIRE_CUDA();
  manual_seed(2);
  struct Case {
    int64_t n, v, d, chunk;
  };
  for (DType dtype : {kFloat32, kFloat64}) {
    const double tol = dtype == kFloat32 ? 2e-4 : 1e-10;
    for (const Case& c : std::vector<Case>{{1, 1, 1, 0}, {7, 10, 3, 1}, {33, 1000, 24, 5}, {300, 2049, 64, 0},
                                           {129, 517, 40, 128}}) {
      const Tensor x = random_tensor({c.n, c.d}, dtype), w = random_tensor({c.v, c.d}, dtype);
      const Tensor b = random_tensor({c.v}, dtype);
      const Tensor target = random_targets(c.n, c.v, 4);
      for (Reduction r : {Reduction::Mean, Reduction::Sum, Reduction::None}) {
        for (bool ahead : {true, false}) {
          SCOPED_TRACE(::testing::Message() << dtype_name(dtype) << " n=" << c.n << " v=" << c.v
                                            << " reduction=" << static_cast<int>(r) << " ahead=" << ahead);
          const LinearCrossEntropyOptions o{.reduction = r, .chunk_rows = c.chunk, .gradients_in_forward = ahead};
          const TensorList cpu = on_device(kCPU, x, w, b, target, o);
          const TensorList gpu = on_device(cuda_device(0), x, w, b, target, o);
          for (size_t i = 0; i < cpu.size(); ++i) expect_close(gpu[i], cpu[i], tol, tol);
        }
      }
    }
  }
}

// bfloat16 autocast on CUDA stays within bfloat16 rounding of the float32 result, the gradients
// computed in the forward or by the recomputing backward.
TEST(LinearCrossEntropyCuda, AutocastBFloat16) {
  TG_REQUIRE_CUDA();
  manual_seed(4);
  // 1032 classes: bfloat16 rows read and written in 16-byte packs; 1031: element by element.
  for (int64_t classes : {1031, 1032}) {
    const Tensor x = random_tensor({257, 64}, kFloat32), w = random_tensor({classes, 64}, kFloat32);
    const Tensor b = random_tensor({classes}, kFloat32);
    const Tensor target = random_targets(257, classes, 7);
    const TensorList want = on_device(kCPU, x, w, b, target, {});
    for (int64_t chunk : {0, 100, -100}) {  // -100: chunks of 100 with the recomputing backward
      TensorList got;
      {
        AutocastGuard amp(cuda_device(0), kBFloat16);
        got = on_device(cuda_device(0), x, w, b, target,
                        {.chunk_rows = chunk < 0 ? -chunk : chunk, .gradients_in_forward = chunk >= 0});
      }
      EXPECT_EQ(got[0].dtype(), kFloat32);
      for (size_t i = 0; i < got.size(); ++i) expect_close(got[i], want[i], 3e-2, 3e-3);
    }
  }
}

// Compiled with CUDA graphs: captured, replayed, and equal to eager.
TEST(LinearCrossEntropyCuda, CapturedInCudaGraphs) {
  TG_REQUIRE_CUDA();
  manual_seed(6);
  const Device dev = cuda_device(0);
  const Tensor w = random_tensor({500, 32}).to(kFloat32).to(dev).requires_grad_(true);
  const Tensor b = random_tensor({500}).to(kFloat32).to(dev).requires_grad_(true);
  auto fn = [&](const Tensor& x, const Tensor& t) { return linear_cross_entropy(x, w, b, t, {.chunk_rows = 48}); };
  auto compiled = compile(fn, CompileOptions{.backend = "cudagraphs"});
  for (int i = 0; i < 4; ++i) {
    const Tensor x = randn({130, 32}, {.device = dev});
    const Tensor t = random_targets(130, 500, 3 + i).to(dev);
    const Tensor xe = x.detach().requires_grad_(true), xc = x.detach().requires_grad_(true);
    fn(xe, t).backward();
    const Tensor gw = w.grad().clone(), gb = b.grad().clone();
    w.grad().zero_();
    b.grad().zero_();
    const Tensor lc = compiled(xc, t);
    lc.backward();
    expect_close(lc, fn(x, t), 1e-5, 1e-5);
    expect_close(xc.grad(), xe.grad(), 1e-4, 1e-6);
    expect_close(w.grad(), gw, 1e-4, 1e-6);
    expect_close(b.grad(), gb, 1e-4, 1e-6);
    w.grad().zero_();
    b.grad().zero_();
  }
  EXPECT_GT(compiled.counters().graphs_captured, 0);
  EXPECT_GT(compiled.counters().replays, 0);
  EXPECT_TRUE(compiled.counters().cudagraph_skips.empty());
}

// The point of the op: a step's peak memory grows by a chunk of logits, not by [N, V] of them
// (512 MiB here in float32, held several times over by the composed path).
TEST(LinearCrossEntropyCuda, PeakMemoryIsAChunkNotTheLogits) {
  TG_REQUIRE_CUDA();
  const Device dev = cuda_device(0);
  const int64_t n = 4096, v = 32768, d = 64;
  const int64_t logits_bytes = n * v * 4;
  const Tensor x = randn({n, d}, {.device = dev}), w = randn({v, d}, {.device = dev});
  const Tensor t = randint(0, v, {n}, {.device = dev});
  auto peak_of_step = [&](bool fused) {
    const Tensor xr = x.detach().requires_grad_(true), wr = w.detach().requires_grad_(true);
    cuda::synchronize(0);
    const int64_t before = cuda::memory_allocated(0);
    cuda::reset_peak_memory_stats(0);
    const Tensor loss = fused ? linear_cross_entropy(xr, wr, Tensor(), t, {.chunk_rows = 512})
                              : cross_entropy(linear(xr, wr), t);
    loss.backward();
    cuda::synchronize(0);
    return cuda::max_memory_allocated(0) - before;
  };
  peak_of_step(true);  // warm-up: cuBLAS handles, workspaces and plans are made once, not per step
  const int64_t fused = peak_of_step(true);
  const int64_t composed = peak_of_step(false);
  EXPECT_LT(fused, logits_bytes / 4) << "fused step peak " << fused << " bytes";
  EXPECT_GT(composed, logits_bytes) << "composed step peak " << composed << " bytes";
}

// No host read of the targets: a bad one gives NaN and is raised at the next synchronization.
// The fused per-row step (one pass, the row kept in shared memory) writes the same bits as the
// forward step followed by the backward step: lse, loss and the rewritten logits, with ignored rows,
// infinities and a GPT-2-sized row among them; float32 and 16-bit logits, aligned or not.
TEST(LinearCrossEntropyCuda, FusedRowStepsEqualTheSeparateStepsBitForBit) {
  TG_REQUIRE_CUDA();
  const Device dev = cuda_device(0);
  manual_seed(5);
  struct Case {
    int64_t rows, classes;
    DType dtype;
  };
  for (const Case& c : std::vector<Case>{{64, 50304, kBFloat16}, {9, 1000, kFloat16}, {33, 4096, kFloat32},
                                         {5, 8, kBFloat16}, {7, 1001, kBFloat16}, {3, 60000, kBFloat16}}) {
    SCOPED_TRACE(::testing::Message() << dtype_name(c.dtype) << " " << c.rows << " x " << c.classes);
    Tensor logits = (random_tensor({c.rows, c.classes}, kFloat32) * 4.0).to(dev, c.dtype);
    // A row with +inf, one with -inf entries, one all -inf but its target.
    logits.narrow(0, 0, 1).narrow(1, 3, 1).fill_(INFINITY);
    logits.narrow(0, 2, 1).narrow(1, 0, c.classes / 2).fill_(-INFINITY);
    const Tensor target = random_targets(c.rows, c.classes, 3).to(dev);
    const Tensor row_grad = full({}, 1.0 / static_cast<double>(c.rows), {.dtype = kFloat32, .device = dev});
    const DType acc = c.dtype == kFloat64 ? kFloat64 : kFloat32;
    const Tensor lse1 = empty({c.rows}, {.dtype = acc, .device = dev}), loss1 = empty_like(lse1);
    const Tensor lse2 = empty_like(lse1), loss2 = empty_like(lse1);
    const Tensor separate = logits.clone(), fused = logits.clone();
    linear_cross_entropy_rows_forward(separate, target, -100, 0, lse1, loss1);
    linear_cross_entropy_rows_backward(separate, lse1, target, -100, 0, row_grad);
    linear_cross_entropy_rows_forward_backward(fused, target, -100, 0, lse2, loss2, row_grad);
    EXPECT_TRUE(same_bits(lse1, lse2));
    EXPECT_TRUE(same_bits(loss1, loss2));
    EXPECT_TRUE(same_bits(separate, fused));
  }
}

TEST(LinearCrossEntropyCuda, OutOfRangeTargetRaisesAtTheNextSync) {
  TG_REQUIRE_CUDA();
  const Device dev = cuda_device(0);
  const Tensor w = zeros({4, 2}, {.device = dev});
  const Tensor t = labels({0, 9, 1}).to(dev);
  // The recomputing backward reads the targets again and names itself.
  {
    const Tensor x = zeros({3, 2}, {.device = dev}).requires_grad_(true);
    const Tensor loss = linear_cross_entropy(x, w, Tensor(), t, {.chunk_rows = 2, .gradients_in_forward = false});
    EXPECT_THROW_MSG(loss.item<float>(),
                     "[linear_cross_entropy] target 9 is out of range for 4 classes (at batch index 1)");
    EXPECT_TRUE(std::isnan(loss.item<float>()));
    loss.backward();
    EXPECT_THROW_MSG(cuda::synchronize(0),
                     "[linear_cross_entropy_backward] target 9 is out of range for 4 classes (at batch index 1)");
  }
  // Gradients computed in the forward pass: the forward's kernels report the target once; the
  // backward only scales what they wrote.
  {
    const Tensor x = zeros({3, 2}, {.device = dev}).requires_grad_(true);
    const Tensor loss = linear_cross_entropy(x, w, Tensor(), t, {.chunk_rows = 2});
    EXPECT_THROW_MSG(loss.item<float>(),
                     "target 9 is out of range for 4 classes (at batch index 1)");
    EXPECT_TRUE(std::isnan(loss.item<float>()));
  }
}

}  // namespace
}  // namespace tg
