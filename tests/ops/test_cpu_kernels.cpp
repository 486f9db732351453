// CPU kernel back ends: products through oneDNN against float64 over every operand layout, its
// thread count following tg::set_num_threads, and the AVX2/AVX-512 variants of the elementwise loops
// rounding exactly as the baseline loop does; the CPU allocator's alignment and its reuse of small
// blocks.
#include <gtest/gtest.h>

#include <dlfcn.h>
#include <malloc.h>

#include <cstring>
#include <cstdint>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "ops/core/cpu/vector_isa.h"
#include "ops/elementwise/elementwise.h"
#include "ops/linalg/cpu/onednn_gemm.h"
#include "support/test_support.h"
#include "tensor/memory/cpu_allocator.h"

namespace tg {
namespace {

using testing::expect_close;
using testing::random_tensor;

// The float32 product checked against the float64 product of the same values.
void expect_matches_float64(const Tensor& got, const Tensor& a, const Tensor& b) {
  expect_close(got, mm(a.to(kFloat64), b.to(kFloat64)), 1e-5, 1e-4);
}

TEST(OneDnnProducts, LargeProductsMatchFloat64InEveryLayout) {
  static_assert(64 * 96 * 160 >= cpu::kOneDnnMinMultiplyAdds, "the shapes below must reach oneDNN");
  const Tensor a = random_tensor({64, 160}, kFloat32), b = random_tensor({160, 96}, kFloat32);
  const Tensor at = random_tensor({160, 64}, kFloat32).t(), bt = random_tensor({96, 160}, kFloat32).t();
  expect_matches_float64(mm(a, b), a, b);
  expect_matches_float64(mm(at, b), at, b);
  expect_matches_float64(mm(a, bt), a, bt);
  expect_matches_float64(mm(at, bt), at, bt);
  // Rows longer than the matrix (a slice of a wider tensor) and a scaled, accumulated product.
  const Tensor wide = random_tensor({64, 200}, kFloat32).slice(1, 20, 180);
  expect_matches_float64(mm(wide, b), wide, b);
  const Tensor bias = random_tensor({96}, kFloat32);
  expect_close(addmm(bias, a, b, 1, 0.5), addmm(bias.to(kFloat64), a.to(kFloat64), b.to(kFloat64), 1, 0.5), 1e-5,
               1e-4);
}

TEST(OneDnnProducts, BatchedAndBroadcastBatchesMatchFloat64) {
  const Tensor a = random_tensor({3, 64, 128}, kFloat32), b = random_tensor({3, 128, 80}, kFloat32);
  expect_close(bmm(a, b), bmm(a.to(kFloat64), b.to(kFloat64)), 1e-5, 1e-4);
  const Tensor shared = random_tensor({1, 128, 80}, kFloat32).expand({3, 128, 80});
  expect_close(bmm(a, shared), bmm(a.to(kFloat64), shared.to(kFloat64)), 1e-5, 1e-4);
  // linear over a 3-D input folds the leading dims into one product.
  const Tensor x = random_tensor({4, 32, 128}, kFloat32), w = random_tensor({96, 128}, kFloat32);
  expect_close(linear(x, w), linear(x.to(kFloat64), w.to(kFloat64)), 1e-5, 1e-4);
}

// The thread count oneDNN's OpenMP kernels take on the calling thread (0 without an OpenMP runtime).
int openmp_threads() {
  auto get = reinterpret_cast<int (*)()>(::dlsym(RTLD_DEFAULT, "omp_get_max_threads"));
  return get != nullptr ? get() : 0;
}

TEST(OneDnnProducts, FollowTheThreadSetting) {
  const Tensor a = random_tensor({128, 128}, kFloat32), b = random_tensor({128, 128}, kFloat32);
  const Tensor one = mm(a, b);
  if (openmp_threads() == 0) GTEST_SKIP() << "no OpenMP runtime in this process (built without oneDNN)";
  EXPECT_EQ(openmp_threads(), 1);
  set_num_threads(2);
  const Tensor two = mm(a, b);
  EXPECT_EQ(openmp_threads(), 2);
  set_num_threads(1);
  mm(a, b);
  EXPECT_EQ(openmp_threads(), 1);
  expect_close(one, two, 1e-6, 1e-5);
}

// Restores the loops' variant cap when a test ends.
struct IsaCap {
  explicit IsaCap(cpu::VectorIsa cap) { cpu::set_max_vector_isa(cap); }
  ~IsaCap() { cpu::set_max_vector_isa(cpu::VectorIsa::Avx512); }
};

bool bitwise_equal(const Tensor& a, const Tensor& b) {
  if (a.sizes() != b.sizes() || a.dtype() != b.dtype()) return false;
  const Tensor x = a.contiguous(), y = b.contiguous();
  return std::memcmp(x.raw_data(), y.raw_data(), static_cast<size_t>(x.numel() * dtype_size(x.dtype()))) == 0;
}

TEST(VectorIsa, WideVariantsRoundExactlyAsTheBaselineLoop) {
  if (cpu::vector_isa() == cpu::VectorIsa::Baseline) {
    GTEST_SKIP() << "no wide variant to compare: this CPU has neither AVX2 nor AVX-512, or the build has "
                    "TG_CPU_ISA_VARIANTS off";
  }
  const std::vector<std::pair<std::string, std::function<Tensor(const Tensor&, const Tensor&)>>> ops = {
      {"add", [](const Tensor& a, const Tensor& b) { return add(a, b, 0.3); }},
      {"sub", [](const Tensor& a, const Tensor& b) { return a - b; }},
      {"mul", [](const Tensor& a, const Tensor& b) { return a * b; }},
      {"div", [](const Tensor& a, const Tensor& b) { return a / (b + 2); }},
      {"maximum", [](const Tensor& a, const Tensor& b) { return maximum(a, b); }},
      {"exp", [](const Tensor& a, const Tensor&) { return exp(a); }},
      {"tanh", [](const Tensor& a, const Tensor&) { return tanh(a); }},
      {"sigmoid", [](const Tensor& a, const Tensor&) { return sigmoid(a); }},
      {"relu", [](const Tensor& a, const Tensor&) { return relu(a); }},
      {"gelu", [](const Tensor& a, const Tensor&) { return gelu(a, "tanh"); }},
      {"sqrt", [](const Tensor& a, const Tensor&) { return sqrt(a + 1.5); }},
      {"gelu_backward", [](const Tensor& a, const Tensor& b) { return gelu_backward(a, b, false); }},
      {"threshold_backward", [](const Tensor& a, const Tensor& b) { return threshold_backward(a, b); }},
  };
  for (DType dtype : {kFloat32, kFloat64, kBFloat16}) {
    // 1000 elements: whole vectors and a remainder of each width.
    const Tensor a = random_tensor({1000}, dtype, false, -3, 3), b = random_tensor({1000}, dtype, false, -3, 3);
    for (const auto& [name, fn] : ops) {
      Tensor baseline;
      {
        IsaCap cap(cpu::VectorIsa::Baseline);
        baseline = fn(a, b);
      }
      for (cpu::VectorIsa isa : {cpu::VectorIsa::Avx2, cpu::VectorIsa::Avx512}) {
        IsaCap cap(isa);
        EXPECT_TRUE(bitwise_equal(fn(a, b), baseline)) << name << " in " << dtype_name(dtype) << " at variant "
                                                       << static_cast<int>(isa);
      }
    }
  }
}

TEST(VectorIsa, CapNeverRaisesAboveTheCpu) {
  const cpu::VectorIsa cpu_isa = cpu::vector_isa();
  IsaCap cap(cpu::VectorIsa::Baseline);
  EXPECT_EQ(cpu::vector_isa(), cpu::VectorIsa::Baseline);
  cpu::set_max_vector_isa(cpu::VectorIsa::Avx512);
  EXPECT_EQ(cpu::vector_isa(), cpu_isa);
}

bool aligned_to_cache_line(const void* p) { return reinterpret_cast<uintptr_t>(p) % 64 == 0; }

TEST(CpuAllocator, BlocksAreCacheLineAlignedAndWritableToTheirSize) {
  Allocator* cpu = cpu_allocator();
  EXPECT_EQ(cpu->allocate(0, kCPU), nullptr);
  for (size_t n : {1, 63, 64, 65, 100, 4095, 4096, 4097, 1 << 20}) {
    void* p = cpu->allocate(n, kCPU);
    ASSERT_NE(p, nullptr) << n << " bytes";
    EXPECT_TRUE(aligned_to_cache_line(p)) << n << " bytes";
    std::memset(p, 0xAB, n);
    cpu->deallocate_sized(p, n);
  }
}

TEST(CpuAllocator, SmallBlocksAreReusedBySizeClass) {
  if (!kCpuAllocatorReusesBlocks) GTEST_SKIP() << "AddressSanitizer build: freed blocks are never reused";
  Allocator* cpu = cpu_allocator();
  void* small = cpu->allocate(100, kCPU);  // the 128-byte class
  cpu->deallocate_sized(small, 100);
  EXPECT_EQ(cpu->allocate(120, kCPU), small) << "a freed block serves the next request of its class";
  void* other = cpu->allocate(120, kCPU);
  EXPECT_NE(other, small) << "a block in use is never handed out twice";
  void* bigger = cpu->allocate(200, kCPU);  // the 256-byte class: not the 128-byte block
  EXPECT_NE(bigger, small);
  EXPECT_NE(bigger, other);
  cpu->deallocate_sized(small, 120);
  cpu->deallocate_sized(other, 120);
  cpu->deallocate_sized(bigger, 200);
}

TEST(CpuAllocator, LargerBlocksAreReusedByQuarterOctave) {
  if (!kCpuAllocatorReusesBlocks) GTEST_SKIP() << "AddressSanitizer build: freed blocks are never reused";
  cpu_empty_cache();
  Allocator* cpu = cpu_allocator();
  void* a = cpu->allocate(300000, kCPU);  // (256 KiB, 320 KiB]: the 320 KiB class
  std::memset(a, 1, 300000);
  cpu->deallocate_sized(a, 300000);
  EXPECT_EQ(cpu_cached_bytes(), 320u << 10);
  void* b = cpu->allocate(330000, kCPU);  // the 384 KiB class: a new block
  EXPECT_NE(b, a);
  void* c = cpu->allocate(270000, kCPU);  // the 320 KiB class again
  EXPECT_EQ(c, a) << "a freed block serves the next request of its class";
  EXPECT_EQ(cpu_cached_bytes(), 0u);
  std::memset(c, 2, 320u << 10);  // the block spans its whole class
  cpu->deallocate_sized(b, 330000);
  cpu->deallocate_sized(c, 270000);
  EXPECT_EQ(cpu_cached_bytes(), (320u + 384u) << 10);
  cpu_empty_cache();
  EXPECT_EQ(cpu_cached_bytes(), 0u);
}

TEST(CpuAllocator, KeepsAtMost128MiBOfLargerBlocksAndNoneAbove32MiB) {
  if (!kCpuAllocatorReusesBlocks) GTEST_SKIP() << "AddressSanitizer build: freed blocks are never reused";
  cpu_empty_cache();
  Allocator* cpu = cpu_allocator();
  const size_t huge = size_t{40} << 20;
  cpu->deallocate_sized(cpu->allocate(huge, kCPU), huge);
  EXPECT_EQ(cpu_cached_bytes(), 0u) << "blocks over 32 MiB go back to malloc";
  const size_t block = size_t{32} << 20;
  std::vector<void*> blocks;
  for (int i = 0; i < 5; ++i) blocks.push_back(cpu->allocate(block, kCPU));
  for (void* p : blocks) cpu->deallocate_sized(p, block);
  EXPECT_EQ(cpu_cached_bytes(), size_t{128} << 20) << "four kept, the fifth freed";
  cpu_empty_cache();
}

// Allocates a small block when its thread ends, after that thread's block cache is gone (thread
// locals end in the reverse order of their construction, and this one is made first).
void* g_block_from_a_finished_thread = nullptr;
struct AllocatesAtThreadExit {
  ~AllocatesAtThreadExit() { g_block_from_a_finished_thread = cpu_allocator()->allocate(300, kCPU); }
};

TEST(CpuAllocator, BlocksAllocatedAfterAThreadsCacheIsGoneSpanTheirWholeClass) {
  std::thread([] {
    thread_local AllocatesAtThreadExit at_exit;
    (void)&at_exit;
    cpu_allocator()->deallocate_sized(cpu_allocator()->allocate(300, kCPU), 300);  // the cache comes after it
  }).join();
  void* p = g_block_from_a_finished_thread;
  ASSERT_NE(p, nullptr);
  // Freed here, it may join this thread's 512-byte class and serve a 512-byte request later.
  if (kCpuAllocatorReusesBlocks) EXPECT_GE(malloc_usable_size(p), 512u);
  cpu_allocator()->deallocate_sized(p, 300);
}

TEST(CpuAllocator, BlocksFreedOnAnotherThreadStayValid) {
  Allocator* cpu = cpu_allocator();
  std::vector<void*> blocks;
  for (int i = 0; i < 64; ++i) blocks.push_back(cpu->allocate(48, kCPU));
  std::thread([&] {
    for (void* p : blocks) cpu->deallocate_sized(p, 48);  // kept by (and freed at the end of) that thread
  }).join();
  Tensor t = full({4}, 2.0);  // small tensors keep working after the other thread's cache is gone
  EXPECT_EQ((t + t).sum().item<double>(), 16.0);
}

}  // namespace
}  // namespace tg
