#include "tensor/memory/cpu_allocator.h"

#include <bit>
#include <cstdlib>
#include <new>

namespace tg {
namespace {

constexpr int kAlignmentLog2 = 6;  // 64 bytes, a cache line: Eigen and the vector loops see aligned rows
constexpr size_t kAlignment = size_t{1} << kAlignmentLog2;
// Blocks of up to 4 KiB fall in power-of-two classes (64, 128, ..., 4096 bytes), at most
// kSmallBlocksPerClass kept per class.
constexpr int kLargestSmallLog2 = 12;
constexpr size_t kLargestSmall = size_t{1} << kLargestSmallLog2;
constexpr int kSmallClasses = kLargestSmallLog2 - kAlignmentLog2 + 1;
constexpr int kSmallBlocksPerClass = 16;
// Larger blocks, up to kLargestCached (32 MiB), fall in classes a quarter of an octave apart (at
// most 25% rounding), and a thread keeps up to kLargeBytesPerThread of them.
constexpr int kStepsPerOctave = 4;
constexpr int kLargestCachedLog2 = 25;
constexpr size_t kLargestCached = size_t{1} << kLargestCachedLog2;
constexpr int kClasses = kSmallClasses + (kLargestCachedLog2 - kLargestSmallLog2) * kStepsPerOctave;
constexpr size_t kLargeBytesPerThread = size_t{128} << 20;

// The size class of a request of `nbytes` (at most kLargestCached).
int size_class(size_t nbytes) {
  if (nbytes <= kLargestSmall) return nbytes <= kAlignment ? 0 : std::bit_width(nbytes - 1) - kAlignmentLog2;
  const int octave = std::bit_width(nbytes - 1) - 1;  // 2^octave < nbytes <= 2^(octave + 1)
  const size_t step = size_t{1} << (octave - 2);
  const int within = static_cast<int>((nbytes - (size_t{1} << octave) + step - 1) / step) - 1;
  return kSmallClasses + (octave - kLargestSmallLog2) * kStepsPerOctave + within;
}

// The block size of class `c`: the largest request the class serves.
size_t class_bytes(int c) {
  if (c < kSmallClasses) return kAlignment << c;
  const int octave = kLargestSmallLog2 + (c - kSmallClasses) / kStepsPerOctave;
  const size_t within = static_cast<size_t>((c - kSmallClasses) % kStepsPerOctave);
  return (size_t{1} << octave) + (within + 1) * (size_t{1} << (octave - 2));
}

void* aligned_block(size_t nbytes) {
  void* p = std::aligned_alloc(kAlignment, (nbytes + kAlignment - 1) / kAlignment * kAlignment);
  if (!p) throw std::bad_alloc();
  return p;
}

// A kept block's first bytes link it to the next kept block of its class.
struct FreeBlock {
  FreeBlock* next;
};

// Freed blocks of one thread, by size class. Blocks are plain aligned_alloc blocks, so any thread
// may free them: a block freed on another thread joins that thread's cache. Keeping blocks, rather
// than handing them back to malloc, also keeps the C library from returning the pages of a
// training step's tensors to the system at the end of each step and faulting them in again on the
// next (a few microseconds a page on virtual machines).
struct BlockCache {
  FreeBlock* head[kClasses] = {};
  int count[kClasses] = {};
  size_t large_bytes = 0;  // kept in the classes above kLargestSmall
  BlockCache();
  ~BlockCache();
  // A kept block of class c, or nullptr.
  void* take(int c);
  // Keeps `ptr`, a block of class c, unless the class or the thread's budget is full.
  bool keep(void* ptr, int c);
  void free_all();
};

// Where this thread's cache is in its life: its destructor may have run while storages (of other
// thread-local or static objects) are still to be freed, and those then go straight to free().
enum class CacheState : unsigned char { NotYet, Alive, Gone };
thread_local CacheState t_state = CacheState::NotYet;  // trivially destructible: readable to the end

BlockCache::BlockCache() { t_state = CacheState::Alive; }
BlockCache::~BlockCache() {
  t_state = CacheState::Gone;
  free_all();
}

void* BlockCache::take(int c) {
  FreeBlock* block = head[c];
  if (block == nullptr) return nullptr;
  head[c] = block->next;
  --count[c];
  if (c >= kSmallClasses) large_bytes -= class_bytes(c);
  return block;
}

bool BlockCache::keep(void* ptr, int c) {
  if (c < kSmallClasses) {
    if (count[c] >= kSmallBlocksPerClass) return false;
  } else {
    if (large_bytes + class_bytes(c) > kLargeBytesPerThread) return false;
    large_bytes += class_bytes(c);
  }
  head[c] = new (ptr) FreeBlock{head[c]};
  ++count[c];
  return true;
}

void BlockCache::free_all() {
  for (int c = 0; c < kClasses; ++c)
    while (void* p = take(c)) std::free(p);
}

BlockCache& thread_cache() {
  thread_local BlockCache cache;
  return cache;
}

class CpuAllocator final : public Allocator {
 public:
  void* allocate(size_t nbytes, Device) override { return nbytes == 0 ? nullptr : host_allocate(nbytes); }
  void deallocate(void* ptr) override { std::free(ptr); }
  void deallocate_sized(void* ptr, size_t nbytes) override { host_deallocate(ptr, nbytes); }
};

}  // namespace

void* host_allocate(size_t nbytes) {
  if (!kCpuAllocatorReusesBlocks || nbytes > kLargestCached) return aligned_block(nbytes);
  const int c = size_class(nbytes);
  if (t_state != CacheState::Gone)
    if (void* p = thread_cache().take(c)) return p;
  // Always the whole class: the block may end up in any thread's cache once freed.
  return aligned_block(class_bytes(c));
}

void host_deallocate(void* ptr, size_t nbytes) noexcept {
  if (ptr == nullptr) return;
  if (kCpuAllocatorReusesBlocks && nbytes <= kLargestCached && t_state == CacheState::Alive &&
      thread_cache().keep(ptr, size_class(nbytes)))
    return;
  std::free(ptr);
}

void cpu_empty_cache() {
  if (t_state == CacheState::Alive) thread_cache().free_all();
}

size_t cpu_cached_bytes() {
  if (t_state != CacheState::Alive) return 0;
  const BlockCache& cache = thread_cache();
  size_t total = cache.large_bytes;
  for (int c = 0; c < kSmallClasses; ++c) total += static_cast<size_t>(cache.count[c]) * class_bytes(c);
  return total;
}

Allocator* cpu_allocator() {
  static CpuAllocator allocator;
  return &allocator;
}

}  // namespace tg
