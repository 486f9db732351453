// The public memory API over the caching allocator; without the CUDA backend no device memory
// exists, so statistics are empty and pools hold nothing.
#include "tensor/memory/cuda_memory.h"

#include <atomic>

#ifdef TG_WITH_CUDA
#include "tensor/cuda/caching_allocator.h"
#include "tensor/cuda_runtime.h"
#include "tensor/device.h"
#endif

namespace tg::cuda {

#ifdef TG_WITH_CUDA

namespace {
int resolve(int device) {
  if (device >= 0) return device;
  return cuda_is_available() ? current_device() : 0;
}
}  // namespace

MemoryStats memory_stats(int device) { return CachingAllocator::get().stats(resolve(device)); }
void reset_peak_memory_stats(int device) { CachingAllocator::get().reset_peak(resolve(device)); }
void empty_cache() { CachingAllocator::get().empty_cache(); }
MempoolId create_mempool() { return CachingAllocator::get().create_pool(); }
MemoryStats mempool_stats(MempoolId pool, int device) {
  return CachingAllocator::get().pool_stats(resolve(device), pool);
}
void release_mempool(MempoolId pool) { CachingAllocator::get().release_pool(pool); }

MempoolGuard::MempoolGuard(MempoolId pool, int device) : device_(resolve(device)), pool_(pool) {
  CachingAllocator::push_route(device_, pool_);
}
MempoolGuard::~MempoolGuard() { CachingAllocator::pop_route(); }

std::pair<const void*, size_t> mempool_block_in_use(MempoolId pool, const void* begin, size_t nbytes, int device,
                                                    const std::vector<const void*>& ignored) {
  const char* b = static_cast<const char*>(begin);
  return CachingAllocator::get().block_in_use(resolve(device), pool, b, b + nbytes, ignored);
}

bool mempool_range_in_use(MempoolId pool, const void* begin, size_t nbytes, int device,
                          const std::vector<const void*>& ignored) {
  return mempool_block_in_use(pool, begin, nbytes, device, ignored).first != nullptr;
}

std::shared_ptr<void> mempool_claim(MempoolId pool, void* ptr, size_t nbytes, int device) {
  if (!CachingAllocator::get().claim(resolve(device), pool, ptr, nbytes)) return nullptr;
  return std::shared_ptr<void>(ptr, [](void* p) { CachingAllocator::get().deallocate(p); });
}

AllocationLog::AllocationLog() { CachingAllocator::set_log(&records_); }
AllocationLog::~AllocationLog() { CachingAllocator::set_log(nullptr); }

#else

namespace {
std::atomic<MempoolId> g_next_pool{1};
}  // namespace

MemoryStats memory_stats(int) { return {}; }
void reset_peak_memory_stats(int) {}
void empty_cache() {}
MempoolId create_mempool() { return g_next_pool++; }
MemoryStats mempool_stats(MempoolId, int) { return {}; }
void release_mempool(MempoolId) {}

MempoolGuard::MempoolGuard(MempoolId pool, int device) : device_(device), pool_(pool) {}
MempoolGuard::~MempoolGuard() = default;

bool mempool_range_in_use(MempoolId, const void*, size_t, int, const std::vector<const void*>&) { return false; }
std::pair<const void*, size_t> mempool_block_in_use(MempoolId, const void*, size_t, int, const std::vector<const void*>&) {
  return {nullptr, 0};
}
std::shared_ptr<void> mempool_claim(MempoolId, void*, size_t, int) { return nullptr; }

AllocationLog::AllocationLog() = default;
AllocationLog::~AllocationLog() = default;

#endif

int64_t memory_allocated(int device) { return memory_stats(device).allocated_bytes; }
int64_t memory_reserved(int device) { return memory_stats(device).reserved_bytes; }
int64_t max_memory_allocated(int device) { return memory_stats(device).peak_allocated_bytes; }

}  // namespace tg::cuda
