// CUDA memory statistics, cache control and private memory pools, without CUDA headers.
// Builds without the CUDA backend report empty statistics (no device memory exists there).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

namespace tg::cuda {

// Counters of the caching allocator for one device (or one private pool on it).
struct MemoryStats {
  int64_t allocated_bytes = 0;       // bytes in blocks handed out to tensors (sizes rounded up to 512 B)
  int64_t reserved_bytes = 0;        // bytes held from the driver, in use or cached
  int64_t peak_allocated_bytes = 0;  // highest allocated_bytes since start or the last reset_peak_memory_stats
  int64_t live_blocks = 0;           // blocks handed out and not yet freed
  int64_t segments = 0;              // driver allocations currently held
  int64_t device_allocations = 0;    // driver allocations made so far (each one is a cache miss)
};

// Statistics of `device` (-1: the current device) over all its pools.
MemoryStats memory_stats(int device = -1);
// Bytes handed out on `device` (-1: current).
int64_t memory_allocated(int device = -1);
// Bytes held from the driver on `device` (-1: current).
int64_t memory_reserved(int device = -1);
// Peak of memory_allocated since start or the last reset.
int64_t max_memory_allocated(int device = -1);
// Restarts peak tracking from the current allocated bytes (device -1: current).
void reset_peak_memory_stats(int device = -1);
// Returns every fully free cached segment of the default pools (and of released private pools)
// to the driver; the only way memory goes back. Synchronizes the devices first.
void empty_cache();

// Identifies a private memory pool (CUDA graphs allocate into one so that replays own their memory).
using MempoolId = uint64_t;
// The default pool every allocation uses unless routed elsewhere.
inline constexpr MempoolId kDefaultMempool = 0;

// A new private pool id (pools hold no memory until something is allocated in them).
MempoolId create_mempool();
// Statistics of one pool on `device` (-1: current).
MemoryStats mempool_stats(MempoolId pool, int device = -1);
// Ends the pool: its cached segments go back to the driver now, blocks still in use go back when
// freed and the cache is next emptied; routing allocations into it afterwards is an error.
void release_mempool(MempoolId pool);

// While alive, this thread's allocations on `device` (-1: current) come from `pool` (guards nest;
// frees always return a block to the pool it came from).
class MempoolGuard {
 public:
  explicit MempoolGuard(MempoolId pool, int device = -1);
  ~MempoolGuard();
  MempoolGuard(const MempoolGuard&) = delete;
  MempoolGuard& operator=(const MempoolGuard&) = delete;

 private:
  int device_;
  MempoolId pool_;
};

// True when memory handed out from private `pool` on `device` (-1: current) overlaps
// [begin, begin + nbytes), not counting blocks that start at an address in `ignored`.
bool mempool_range_in_use(MempoolId pool, const void* begin, size_t nbytes, int device = -1,
                          const std::vector<const void*>& ignored = {});
// The first such block, as {address, size}; {nullptr, 0} when none (for diagnostics).
std::pair<const void*, size_t> mempool_block_in_use(MempoolId pool, const void* begin, size_t nbytes, int device = -1,
                                                    const std::vector<const void*>& ignored = {});
// Hands out exactly [ptr, ptr + nbytes) of private `pool` again, when all of it is free (the output
// buffer of a recorded CUDA graph whose tensors all died). Returns the owner of that memory, which
// gives it back when destroyed, or null when any of it is in use.
std::shared_ptr<void> mempool_claim(MempoolId pool, void* ptr, size_t nbytes, int device = -1);

// One allocation: its address and requested size.
struct AllocationRecord {
  const void* ptr = nullptr;
  size_t nbytes = 0;
};

// While alive, records every CUDA allocation this thread makes (a graph recording uses it to know
// which memory its replays write). Logs do not nest.
class AllocationLog {
 public:
  AllocationLog();
  ~AllocationLog();
  AllocationLog(const AllocationLog&) = delete;
  AllocationLog& operator=(const AllocationLog&) = delete;
  // The allocations made so far, in order.
  const std::vector<AllocationRecord>& records() const { return records_; }

 private:
  std::vector<AllocationRecord> records_;
};

}  // namespace tg::cuda
