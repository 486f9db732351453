// The CUDA caching allocator: block reuse, statistics, peak tracking, empty_cache, private pools
// (routing, isolation, release), thread safety, and the current-stream interface. GPU tests skip
// without a device; a build without the CUDA backend reports empty statistics.
#include <thread>
#include <vector>

#include "support/test_support.h"
#include "tensor/cuda_runtime.h"
#include "tensor/memory/cuda_memory.h"

#ifdef TG_WITH_CUDA
#include "tensor/cuda/cuda_check.h"
#endif

namespace tg {
namespace {

// A float32 CUDA tensor of exactly nbytes (a multiple of 4).
Tensor cuda_bytes(int64_t nbytes) { return empty({nbytes / 4}, {.dtype = kFloat32, .device = cuda_device(0)}); }

constexpr int64_t kMiB = 1 << 20;

#ifndef TG_WITH_CUDA
TEST(CudaAllocator, BuildWithoutCudaReportsNoMemory) {
  const cuda::MemoryStats s = cuda::memory_stats();
  EXPECT_EQ(s.allocated_bytes, 0);
  EXPECT_EQ(s.reserved_bytes, 0);
  EXPECT_EQ(cuda::memory_allocated(), 0);
  const cuda::MempoolId a = cuda::create_mempool();
  const cuda::MempoolId b = cuda::create_mempool();
  EXPECT_NE(a, b);
  EXPECT_NE(a, cuda::kDefaultMempool);
  EXPECT_FALSE(cuda_is_available());
  EXPECT_THROW_MSG(cuda_bytes(16), "built without CUDA support");
}
#endif

TEST(CudaAllocator, FreedBlockIsReusedAtTheSameAddress) {
  TG_REQUIRE_CUDA();
  cuda::empty_cache();
  void* first = nullptr;
  {
    Tensor t = cuda_bytes(4096);
    first = t.raw_data();
  }
  const int64_t mallocs = cuda::memory_stats().device_allocations;
  Tensor again = cuda_bytes(4096);
  EXPECT_EQ(again.raw_data(), first);
  EXPECT_EQ(cuda::memory_stats().device_allocations, mallocs) << "a cached block should need no driver call";
}

TEST(CudaAllocator, StatsFollowAllocationsAndRoundTo512Bytes) {
  TG_REQUIRE_CUDA();
  const cuda::MemoryStats before = cuda::memory_stats();
  {
    Tensor a = cuda_bytes(4);      // rounds to 512
    Tensor b = cuda_bytes(1000);   // rounds to 1024
    Tensor c = cuda_bytes(4096);   // exact
    const cuda::MemoryStats during = cuda::memory_stats();
    EXPECT_EQ(during.allocated_bytes - before.allocated_bytes, 512 + 1024 + 4096);
    EXPECT_EQ(during.live_blocks - before.live_blocks, 3);
    EXPECT_GE(during.reserved_bytes, during.allocated_bytes);
    EXPECT_EQ(cuda::memory_allocated(), during.allocated_bytes);
    EXPECT_EQ(cuda::memory_allocated(0), during.allocated_bytes);
  }
  const cuda::MemoryStats after = cuda::memory_stats();
  EXPECT_EQ(after.allocated_bytes, before.allocated_bytes);
  EXPECT_EQ(after.live_blocks, before.live_blocks);
  EXPECT_GE(after.reserved_bytes, after.allocated_bytes) << "freed memory stays cached";
}

TEST(CudaAllocator, SmallBlocksShareOneSegmentAndMergeBack) {
  TG_REQUIRE_CUDA();
  cuda::empty_cache();
  const int64_t segments = cuda::memory_stats().segments;
  std::vector<Tensor> ts;
  for (int i = 0; i < 8; ++i) ts.push_back(cuda_bytes(64 * 1024));
  // 8 x 64 KiB fit in one 2 MiB small segment (at most one new segment, even if one was cached).
  EXPECT_LE(cuda::memory_stats().segments - segments, 1);
  ts.clear();
  // Once all are freed, the pieces merge: a 1 MiB request fits in the same segment again.
  const int64_t mallocs = cuda::memory_stats().device_allocations;
  Tensor big = cuda_bytes(kMiB);
  EXPECT_EQ(cuda::memory_stats().device_allocations, mallocs);
}

TEST(CudaAllocator, PeakTracksTheHighWaterMarkUntilReset) {
  TG_REQUIRE_CUDA();
  cuda::reset_peak_memory_stats();
  const int64_t base = cuda::memory_allocated();
  EXPECT_EQ(cuda::max_memory_allocated(), base);
  {
    Tensor a = cuda_bytes(3 * kMiB);
    Tensor b = cuda_bytes(5 * kMiB);
  }
  EXPECT_EQ(cuda::memory_allocated(), base);
  EXPECT_EQ(cuda::max_memory_allocated() - base, 8 * kMiB);
  cuda::reset_peak_memory_stats();
  EXPECT_EQ(cuda::max_memory_allocated(), base);
}

TEST(CudaAllocator, EmptyCacheReturnsOnlyFreeSegments) {
  TG_REQUIRE_CUDA();
  Tensor keep = cuda_bytes(12 * kMiB);  // a large segment of its own, still in use
  { Tensor gone = cuda_bytes(64 * kMiB); }
  const int64_t reserved = cuda::memory_reserved();
  cuda::empty_cache();
  const int64_t after = cuda::memory_reserved();
  EXPECT_LE(after, reserved - 64 * kMiB);
  EXPECT_GE(after, 12 * kMiB) << "a segment in use must not be released";
  EXPECT_EQ(cuda::memory_stats().reserved_bytes, after);
  // The live tensor is intact and usable.
  keep.fill_(1.0);
  EXPECT_EQ(keep.sum().item<float>(), 3.0f * kMiB);
}

TEST(CudaAllocator, LargeRequestsGetTheirOwnRoundedSegment) {
  TG_REQUIRE_CUDA();
  cuda::empty_cache();
  const cuda::MemoryStats before = cuda::memory_stats();
  Tensor t = cuda_bytes(11 * kMiB);
  const cuda::MemoryStats after = cuda::memory_stats();
  EXPECT_EQ(after.segments - before.segments, 1);
  EXPECT_EQ(after.reserved_bytes - before.reserved_bytes, 12 * kMiB);  // rounded up to 2 MiB
}

TEST(CudaAllocator, PrivatePoolRoutesThisThreadsAllocations) {
  TG_REQUIRE_CUDA();
  const cuda::MempoolId pool = cuda::create_mempool();
  EXPECT_NE(pool, cuda::kDefaultMempool);
  const int64_t default_live = cuda::mempool_stats(cuda::kDefaultMempool).live_blocks;
  Tensor in_pool;
  void* pool_addr = nullptr;
  {
    cuda::MempoolGuard guard(pool);
    in_pool = cuda_bytes(8192);
    pool_addr = in_pool.raw_data();
    // Another thread is not routed.
    int64_t other_live = -1;
    std::thread other([&] {
      Tensor t = cuda_bytes(8192);
      other_live = cuda::mempool_stats(pool).live_blocks;
    });
    other.join();
    EXPECT_EQ(other_live, 1);
  }
  cuda::MemoryStats ps = cuda::mempool_stats(pool);
  EXPECT_EQ(ps.live_blocks, 1);
  EXPECT_EQ(ps.allocated_bytes, 8192);
  EXPECT_GT(ps.reserved_bytes, 0);
  EXPECT_EQ(cuda::mempool_stats(cuda::kDefaultMempool).live_blocks, default_live);
  // Device totals include every pool.
  EXPECT_GE(cuda::memory_stats().allocated_bytes, cuda::mempool_stats(cuda::kDefaultMempool).allocated_bytes + 8192);

  // Isolation: the freed pool block is not handed to default-pool allocations...
  in_pool = Tensor();
  EXPECT_EQ(cuda::mempool_stats(pool).live_blocks, 0);
  Tensor outside = cuda_bytes(8192);
  EXPECT_NE(outside.raw_data(), pool_addr);
  // ...but is reused inside the pool.
  {
    cuda::MempoolGuard guard(pool);
    Tensor inside = cuda_bytes(8192);
    EXPECT_EQ(inside.raw_data(), pool_addr);
  }
  cuda::release_mempool(pool);
}

TEST(CudaAllocator, GuardsNestAndRestore) {
  TG_REQUIRE_CUDA();
  const cuda::MempoolId outer = cuda::create_mempool();
  const cuda::MempoolId inner = cuda::create_mempool();
  {
    cuda::MempoolGuard g1(outer);
    Tensor a = cuda_bytes(1024);
    {
      cuda::MempoolGuard g2(inner);
      Tensor b = cuda_bytes(1024);
      EXPECT_EQ(cuda::mempool_stats(inner).live_blocks, 1);
    }
    Tensor c = cuda_bytes(1024);
    EXPECT_EQ(cuda::mempool_stats(outer).live_blocks, 2);
    EXPECT_EQ(cuda::mempool_stats(inner).live_blocks, 0);
  }
  cuda::release_mempool(inner);
  cuda::release_mempool(outer);
}

TEST(CudaAllocator, ReleasedPoolReturnsItsMemoryAndRejectsRouting) {
  TG_REQUIRE_CUDA();
  const cuda::MempoolId pool = cuda::create_mempool();
  Tensor survivor;
  {
    cuda::MempoolGuard guard(pool);
    survivor = cuda_bytes(24 * kMiB);  // a segment of its own, alive past the release
    { Tensor t = cuda_bytes(4 * kMiB); }  // a 20 MiB segment, cached once freed
  }
  const int64_t reserved = cuda::memory_reserved();
  const int64_t pool_reserved = cuda::mempool_stats(pool).reserved_bytes;
  EXPECT_EQ(pool_reserved, 44 * kMiB);
  cuda::release_mempool(pool);
  EXPECT_EQ(cuda::memory_reserved(), reserved - 20 * kMiB);
  EXPECT_EQ(cuda::mempool_stats(pool).reserved_bytes, 24 * kMiB);
  {
    cuda::MempoolGuard guard(pool);
    EXPECT_THROW_MSG(cuda_bytes(1024), "which was released");
  }
  survivor.fill_(2.0);
  EXPECT_EQ(survivor.sum().item<float>(), 2.0f * 6 * kMiB);
  survivor = Tensor();
  cuda::empty_cache();
  EXPECT_EQ(cuda::mempool_stats(pool).reserved_bytes, 0);
  EXPECT_LE(cuda::memory_reserved(), reserved - pool_reserved);
  EXPECT_THROW_MSG(cuda::release_mempool(cuda::kDefaultMempool), "cannot be released");
}

TEST(CudaAllocator, ConcurrentThreadsKeepStatsConsistent) {
  TG_REQUIRE_CUDA();
  const cuda::MemoryStats before = cuda::memory_stats();
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([t] {
      std::vector<Tensor> held;
      for (int i = 0; i < 200; ++i) {
        held.push_back(cuda_bytes(512 * (1 + (i * 7 + t) % 64)));
        if (held.size() > 10) held.erase(held.begin() + (i % 10));
      }
    });
  }
  for (auto& th : threads) th.join();
  const cuda::MemoryStats after = cuda::memory_stats();
  EXPECT_EQ(after.allocated_bytes, before.allocated_bytes);
  EXPECT_EQ(after.live_blocks, before.live_blocks);
}

TEST(CudaAllocator, CopiesRoundTripThroughTheDevice) {
  TG_REQUIRE_CUDA();
  Tensor h = arange(0.0, 1000.0, 1.0, {.dtype = kFloat32});
  Tensor d = h.cuda();
  EXPECT_TRUE(d.is_cuda());
  Tensor d2 = d.clone();
  EXPECT_EQ(d2.cpu().to_vector<float>(), h.to_vector<float>());
}

#ifdef TG_WITH_CUDA
TEST(CudaRuntime, CurrentStreamIsPerThreadAndWorkRunsOnIt) {
  TG_REQUIRE_CUDA();
  EXPECT_EQ(cuda::current_stream(), nullptr);
  cudaStream_t side = nullptr;
  TG_CUDA_CHECK(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking));
  cudaStream_t seen_elsewhere = side;
  {
    cuda::set_current_stream(side);
    EXPECT_EQ(cuda::current_stream(), side);
    std::thread other([&] { seen_elsewhere = cuda::current_stream(); });
    other.join();
    // A product on the side stream (cuBLAS re-bound to it, with its workspace) gives the right values.
    Tensor a = testing::random_tensor({33, 17}, kFloat32);
    Tensor b = testing::random_tensor({17, 9}, kFloat32);
    Tensor y = mm(a.cuda(), b.cuda());
    TG_CUDA_CHECK(cudaStreamSynchronize(side));
    testing::expect_close(y.cpu(), mm(a, b), 1e-5, 1e-5);
    cuda::set_current_stream(nullptr);
  }
  EXPECT_EQ(seen_elsewhere, nullptr);
  EXPECT_EQ(cuda::current_stream(), nullptr);
  TG_CUDA_CHECK(cudaStreamDestroy(side));
  cuda::synchronize();
  EXPECT_EQ(cuda::current_device(), 0);
  EXPECT_GE(cuda_device_count(), 1);
  EXPECT_THROW_MSG(cuda::set_device(cuda_device_count()), "[set_device] invalid device index");
}
#endif

}  // namespace
}  // namespace tg
