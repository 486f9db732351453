// The CUDA caching allocator: device memory is taken from the driver in segments, handed out in
// blocks, and cached on free for reuse, so steady-state training makes no driver calls.
//
// Design (sizes rounded up to 512 B):
// - requests up to 1 MiB are "small" and carved from 2 MiB segments; larger ones from 20 MiB
//   segments (below 10 MiB) or from segments of their own size rounded up to 2 MiB;
// - free blocks live per device per pool in lists ordered by (size, address); a request takes the
//   smallest fitting block (best fit) and splits off the remainder; freed blocks merge with free
//   neighbours of the same segment;
// - memory returns to the driver only in empty_cache(), release of a private pool, or when a
//   driver allocation fails (then cached segments are released and the allocation retried).
//
// Stream assumption: all work runs on one stream at a time (tapegraph's current stream), so a
// block freed on the host can be handed out again at once: any later kernel that uses it is
// queued behind every kernel that used it before. Graph capture works on a second stream into a
// private pool; that memory is replayed later on the current stream, and the graph executor decides
// which of it a replay may overwrite.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "tensor/memory/allocator.h"
#include "tensor/memory/cuda_memory.h"

namespace tg::cuda {

// Thread-safe caching allocator for all CUDA devices (one process-wide instance).
class CachingAllocator final : public Allocator {
 public:
  // The process-wide instance (never destroyed, so storages freed at exit still find it).
  static CachingAllocator& get();

  // Allocates on `device`, from the pool this thread routes that device to.
  void* allocate(size_t nbytes, Device device) override;
  // Returns the block to the free list of its own pool (whatever routing is active now).
  void deallocate(void* ptr) override;
  // Allocates on `device` from `pool`, ignoring routing (for long-lived buffers such as the cuBLAS workspace).
  void* allocate_on(int device, size_t nbytes, MempoolId pool);

  // Totals of `device` over all pools (zeros for a device never used).
  MemoryStats stats(int device) const;
  // Counters of one pool on `device` (zeros when it holds nothing there).
  MemoryStats pool_stats(int device, MempoolId pool) const;
  // Restarts peak tracking on `device`, for the totals and every pool.
  void reset_peak(int device);
  // Frees whole cached segments of the default pool and of released pools, on every device.
  void empty_cache();
  // A fresh private pool id.
  MempoolId create_pool();
  // Marks `pool` released and frees its whole cached segments; its live blocks stay valid.
  void release_pool(MempoolId pool);
  // The first block handed out from private `pool` on `device` that overlaps [begin, end) and does
  // not start at an address in `ignored`, as {address, size}; {nullptr, 0} when there is none.
  std::pair<const void*, size_t> block_in_use(int device, MempoolId pool, const char* begin, const char* end,
                                              const std::vector<const void*>& ignored = {}) const;
  // Hands out exactly [ptr, ptr + nbytes) of private `pool` again when all of it is free, splitting
  // the free block around it (freed with deallocate(ptr)); false when any of it is in use.
  bool claim(int device, MempoolId pool, void* ptr, size_t nbytes);

  // Routing for MempoolGuard: allocations on `device` by this thread go to `pool` until popped.
  static void push_route(int device, MempoolId pool);
  static void pop_route();
  // Allocation logging for AllocationLog: this thread's allocations are appended to `log` (or not, for null).
  static void set_log(std::vector<AllocationRecord>* log);
  // While `held` is not null, this thread's frees are appended to it instead (work queued on another
  // stream may still use the memory); whoever set it deallocates them once that work is ordered.
  static void hold_frees(std::vector<void*>* held);

 private:
  struct Block;
  struct Pool;
  struct BySize {
    bool operator()(const Block* a, const Block* b) const;
  };
  using FreeList = std::set<Block*, BySize>;
  struct Pool {
    FreeList small_free;
    FreeList large_free;
    MemoryStats stats;
    bool released = false;
    // Private pools only: every block by address, so ranges can be queried and claimed.
    std::map<const char*, Block*> by_address;
    bool tracks_addresses = false;
  };
  struct Block {
    char* ptr = nullptr;
    size_t size = 0;
    int device = 0;
    Pool* pool = nullptr;
    MempoolId pool_id = 0;
    bool small = false;
    bool allocated = false;
    Block* prev = nullptr;  // neighbours within the same segment
    Block* next = nullptr;
  };
  struct DeviceState {
    std::unordered_map<MempoolId, std::unique_ptr<Pool>> pools;
    MemoryStats totals;
  };

  CachingAllocator() = default;
  DeviceState& device_state(int device);
  Pool& pool_for(int device, MempoolId id);
  // The pool `id` on `device` if it holds anything there, else null (no creation).
  const Pool* find_pool(int device, MempoolId id) const;
  void* allocate_locked(int device, size_t nbytes, MempoolId pool);
  Block* new_segment(int device, Pool& pool, MempoolId id, size_t size, bool small);
  // Frees the fully free segments of releasable pools on `device`; returns the bytes released.
  size_t release_cached_locked(int device, bool only_released_pools);
  void free_segments_of(int device, Pool& pool);
  // Marks a free block handed out (removing it from its free list first is the caller's job).
  void hand_out(Pool& pool, Block* block);
  // Splits `block` at `offset`: the tail becomes a new free block of the same segment, returned.
  Block* split_tail(Pool& pool, Block* block, size_t offset);
  // The block of `pool` that contains `p`, or null.
  static Block* block_at(const Pool& pool, const char* p);

  mutable std::mutex mutex_;
  std::vector<std::unique_ptr<DeviceState>> devices_;
  std::unordered_map<void*, Block*> live_;
  std::unordered_set<MempoolId> released_;
  MempoolId next_pool_id_ = 1;
};

}  // namespace tg::cuda
