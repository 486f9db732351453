#include "tensor/cpu_allocator.h"

#include <bit>
#include <cstdlib>
#include <new>

namespace tg {
namespace {

constexpr size_t kAlignment = 64;      // a cache line: Eigen and the vector loops see aligned rows
constexpr size_t kLargestCached = 4096;
constexpr int kClasses = 7;            // 64, 128, ..., 4096 bytes
constexpr int kBlocksPerClass = 16;

// The size class of a request of `nbytes` (at most kLargestCached) and that class's block size.
int size_class(size_t nbytes) { return nbytes <= kAlignment ? 0 : std::bit_width(nbytes - 1) - 6; }
size_t class_bytes(int c) { return kAlignment << c; }

void* aligned_block(size_t nbytes) {
  void* p = std::aligned_alloc(kAlignment, (nbytes + kAlignment - 1) / kAlignment * kAlignment);
  if (!p) throw std::bad_alloc();
  return p;
}

// Freed small blocks of one thread, by size class. Blocks are plain aligned_alloc blocks, so any
// thread may free them: a block freed on another thread joins that thread's cache.
struct BlockCache {
  void* blocks[kClasses][kBlocksPerClass];
  int count[kClasses] = {};
  BlockCache();
  ~BlockCache();
};

// Where this thread's cache is in its life: its destructor may have run while storages (of other
// thread-local or static objects) are still to be freed, and those then go straight to free().
enum class CacheState : unsigned char { NotYet, Alive, Gone };
thread_local CacheState t_state = CacheState::NotYet;  // trivially destructible: readable to the end

BlockCache::BlockCache() { t_state = CacheState::Alive; }
BlockCache::~BlockCache() {
  t_state = CacheState::Gone;
  for (int c = 0; c < kClasses; ++c)
    for (int i = 0; i < count[c]; ++i) std::free(blocks[c][i]);
}

BlockCache& thread_cache() {
  thread_local BlockCache cache;
  return cache;
}

class CpuAllocator final : public Allocator {
 public:
  void* allocate(size_t nbytes, Device) override { return nbytes == 0 ? nullptr : allocate_small(nbytes); }
  void deallocate(void* ptr) override { std::free(ptr); }
  void deallocate_sized(void* ptr, size_t nbytes) override { deallocate_small(ptr, nbytes); }
};

}  // namespace

void* allocate_small(size_t nbytes) {
  if (!kCpuAllocatorReusesBlocks || nbytes > kLargestCached) return aligned_block(nbytes);
  const int c = size_class(nbytes);
  if (t_state != CacheState::Gone) {
    BlockCache& cache = thread_cache();
    if (cache.count[c] > 0) return cache.blocks[c][--cache.count[c]];
  }
  // Always the whole class: the block may end up in any thread's cache once freed.
  return aligned_block(class_bytes(c));
}

void deallocate_small(void* ptr, size_t nbytes) noexcept {
  if (ptr == nullptr) return;
  if (kCpuAllocatorReusesBlocks && nbytes <= kLargestCached && t_state == CacheState::Alive) {
    BlockCache& cache = thread_cache();
    const int c = size_class(nbytes);
    if (cache.count[c] < kBlocksPerClass) {
      cache.blocks[c][cache.count[c]++] = ptr;
      return;
    }
  }
  std::free(ptr);
}

Allocator* cpu_allocator() {
  static CpuAllocator allocator;
  return &allocator;
}

}  // namespace tg
