#include "tensor/cuda/caching_allocator.h"

#include <algorithm>
#include <functional>
#include <utility>

#include "tensor/cuda/cuda_check.h"
#include "tensor/cuda/device_guard.h"

namespace tg::cuda {
namespace {

constexpr size_t kMinBlock = 512;               // every size is a multiple of this
constexpr size_t kSmallSize = 1 << 20;          // requests up to here use the small pool
constexpr size_t kSmallSegment = 2 << 20;       // segment size of the small pool
constexpr size_t kMidSegment = 20 << 20;        // segment size for requests below kLargeSize
constexpr size_t kLargeSize = 10 << 20;         // requests from here get a segment of their own
constexpr size_t kLargeRound = 2 << 20;         // ... rounded up to this

size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

size_t segment_size(size_t size) {
  if (size <= kSmallSize) return kSmallSegment;
  if (size < kLargeSize) return kMidSegment;
  return round_up(size, kLargeRound);
}

// Splitting keeps the remainder cached; in the large pool only when it is itself a large block,
// so big segments are not ground down into slivers.
bool should_split(size_t block, size_t request, bool small) {
  const size_t rest = block - request;
  return small ? rest >= kMinBlock : rest > kSmallSize;
}

void add(MemoryStats& s, int64_t bytes) {
  s.allocated_bytes += bytes;
  s.live_blocks += bytes > 0 ? 1 : -1;
  s.peak_allocated_bytes = std::max(s.peak_allocated_bytes, s.allocated_bytes);
}

void add_segment(MemoryStats& s, int64_t bytes) {
  s.reserved_bytes += bytes;
  s.segments += bytes > 0 ? 1 : -1;
  if (bytes > 0) ++s.device_allocations;
}

// This thread's pool routes, innermost last.
thread_local std::vector<std::pair<int, MempoolId>> t_routes;
// This thread's allocation log, if one is open.
thread_local std::vector<AllocationRecord>* t_log = nullptr;
// Where this thread's frees are held back, if anywhere (CachingAllocator::hold_frees).
thread_local std::vector<void*>* t_held = nullptr;

// True when the current stream is being captured into a CUDA graph (then memory must not go back
// to the driver). Querying the legacy stream while another stream captures is itself an error,
// which also means a capture is under way.
bool capturing() {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(current_stream(), &status) != cudaSuccess) {
    (void)cudaGetLastError();
    return true;
  }
  return status != cudaStreamCaptureStatusNone;
}

}  // namespace

bool CachingAllocator::BySize::operator()(const Block* a, const Block* b) const {
  if (a->size != b->size) return a->size < b->size;
  return std::less<const char*>()(a->ptr, b->ptr);
}

CachingAllocator& CachingAllocator::get() {
  static CachingAllocator* instance = new CachingAllocator();
  return *instance;
}

CachingAllocator::DeviceState& CachingAllocator::device_state(int device) {
  TG_CHECK(device >= 0, "[cuda allocator] invalid device index ", device);
  if (devices_.size() <= static_cast<size_t>(device)) devices_.resize(static_cast<size_t>(device) + 1);
  auto& d = devices_[static_cast<size_t>(device)];
  if (!d) d = std::make_unique<DeviceState>();
  return *d;
}

CachingAllocator::Pool& CachingAllocator::pool_for(int device, MempoolId id) {
  TG_CHECK(id < next_pool_id_, "[cuda allocator] memory pool ", id, " was never created (use create_mempool())");
  TG_CHECK(!released_.count(id), "[cuda allocator] allocation routed to memory pool ", id, ", which was released");
  auto& slot = device_state(device).pools[id];
  if (!slot) {
    slot = std::make_unique<Pool>();
    slot->tracks_addresses = id != kDefaultMempool;
  }
  return *slot;
}

void* CachingAllocator::allocate(size_t nbytes, Device where) {
  if (nbytes == 0) return nullptr;
  const int device = where.index;
  MempoolId pool = kDefaultMempool;
  for (auto it = t_routes.rbegin(); it != t_routes.rend(); ++it) {
    if (it->first == device) {
      pool = it->second;
      break;
    }
  }
  std::lock_guard<std::mutex> lock(mutex_);
  return allocate_locked(device, nbytes, pool);
}

void* CachingAllocator::allocate_on(int device, size_t nbytes, MempoolId pool) {
  if (nbytes == 0) return nullptr;
  std::lock_guard<std::mutex> lock(mutex_);
  return allocate_locked(device, nbytes, pool);
}

void* CachingAllocator::allocate_locked(int device, size_t nbytes, MempoolId pool_id) {
  const size_t size = round_up(std::max(nbytes, kMinBlock), kMinBlock);
  const bool small = size <= kSmallSize;
  Pool& pool = pool_for(device, pool_id);
  FreeList& free_list = small ? pool.small_free : pool.large_free;
  Block key;
  key.size = size;
  Block* block = nullptr;
  auto it = free_list.lower_bound(&key);
  if (it != free_list.end()) {
    block = *it;
    free_list.erase(it);
  } else {
    block = new_segment(device, pool, pool_id, segment_size(size), small);
  }
  if (should_split(block->size, size, small)) free_list.insert(split_tail(pool, block, size));
  hand_out(pool, block);
  add(device_state(device).totals, static_cast<int64_t>(block->size));
  if (t_log) t_log->push_back({block->ptr, nbytes});
  return block->ptr;
}

void CachingAllocator::hand_out(Pool& pool, Block* block) {
  block->allocated = true;
  live_.emplace(block->ptr, block);
  add(pool.stats, static_cast<int64_t>(block->size));
}

CachingAllocator::Block* CachingAllocator::split_tail(Pool& pool, Block* block, size_t offset) {
  Block* rest = new Block(*block);
  rest->ptr = block->ptr + offset;
  rest->size = block->size - offset;
  rest->allocated = false;
  rest->prev = block;
  if (block->next) block->next->prev = rest;
  block->next = rest;
  block->size = offset;
  if (pool.tracks_addresses) pool.by_address.emplace(rest->ptr, rest);
  return rest;
}

CachingAllocator::Block* CachingAllocator::block_at(const Pool& pool, const char* p) {
  auto it = pool.by_address.upper_bound(p);
  if (it == pool.by_address.begin()) return nullptr;
  Block* b = std::prev(it)->second;
  return p < b->ptr + b->size ? b : nullptr;
}

CachingAllocator::Block* CachingAllocator::new_segment(int device, Pool& pool, MempoolId id, size_t size,
                                                        bool small) {
  DeviceGuard guard(device);
  void* ptr = nullptr;
  cudaError_t err = cudaMalloc(&ptr, size);
  if (err == cudaErrorMemoryAllocation && !capturing()) {
    (void)cudaGetLastError();
    release_cached_locked(device, false);
    err = cudaMalloc(&ptr, size);
  }
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    const MemoryStats& t = device_state(device).totals;
    constexpr double kMiB = 1024.0 * 1024.0;
    TG_FAIL("[cuda allocator] CUDA out of memory: tried to allocate ", static_cast<double>(size) / kMiB,
            " MiB on cuda:", device, " (", static_cast<double>(t.allocated_bytes) / kMiB, " MiB allocated, ",
            static_cast<double>(t.reserved_bytes) / kMiB, " MiB reserved by tapegraph): ", cudaGetErrorString(err));
  }
  Block* block = new Block();
  block->ptr = static_cast<char*>(ptr);
  block->size = size;
  block->device = device;
  block->pool = &pool;
  block->pool_id = id;
  block->small = small;
  if (pool.tracks_addresses) pool.by_address.emplace(block->ptr, block);
  add_segment(pool.stats, static_cast<int64_t>(size));
  add_segment(device_state(device).totals, static_cast<int64_t>(size));
  return block;
}

void CachingAllocator::deallocate(void* ptr) {
  if (ptr == nullptr) return;
  if (t_held != nullptr) {
    t_held->push_back(ptr);
    return;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = live_.find(ptr);
  TG_CHECK(it != live_.end(), "[cuda allocator] free of a pointer that is not a live CUDA allocation");
  Block* block = it->second;
  live_.erase(it);
  block->allocated = false;
  Pool& pool = *block->pool;
  add(pool.stats, -static_cast<int64_t>(block->size));
  add(device_state(block->device).totals, -static_cast<int64_t>(block->size));
  FreeList& free_list = block->small ? pool.small_free : pool.large_free;
  if (Block* prev = block->prev; prev && !prev->allocated) {
    free_list.erase(prev);
    prev->size += block->size;
    prev->next = block->next;
    if (block->next) block->next->prev = prev;
    pool.by_address.erase(block->ptr);
    delete block;
    block = prev;
  }
  if (Block* next = block->next; next && !next->allocated) {
    free_list.erase(next);
    block->size += next->size;
    block->next = next->next;
    if (next->next) next->next->prev = block;
    pool.by_address.erase(next->ptr);
    delete next;
  }
  free_list.insert(block);
}

void CachingAllocator::free_segments_of(int device, Pool& pool) {
  DeviceState& d = device_state(device);
  for (FreeList* list : {&pool.small_free, &pool.large_free}) {
    for (auto it = list->begin(); it != list->end();) {
      Block* b = *it;
      if (b->prev || b->next) {
        ++it;
        continue;
      }
      TG_CUDA_CHECK(cudaFree(b->ptr));
      add_segment(pool.stats, -static_cast<int64_t>(b->size));
      add_segment(d.totals, -static_cast<int64_t>(b->size));
      pool.by_address.erase(b->ptr);
      delete b;
      it = list->erase(it);
    }
  }
}

size_t CachingAllocator::release_cached_locked(int device, bool only_released_pools) {
  if (devices_.size() <= static_cast<size_t>(device) || !devices_[static_cast<size_t>(device)]) return 0;
  DeviceState& d = *devices_[static_cast<size_t>(device)];
  const int64_t before = d.totals.reserved_bytes;
  DeviceGuard guard(device);
  // Kernels queued on any stream may still use the cached blocks.
  TG_CUDA_CHECK(cudaDeviceSynchronize());
  for (auto it = d.pools.begin(); it != d.pools.end();) {
    Pool& pool = *it->second;
    const bool releasable = pool.released || (!only_released_pools && it->first == kDefaultMempool);
    if (releasable) free_segments_of(device, pool);
    if (pool.released && pool.stats.reserved_bytes == 0) {
      it = d.pools.erase(it);
    } else {
      ++it;
    }
  }
  return static_cast<size_t>(before - d.totals.reserved_bytes);
}

void CachingAllocator::empty_cache() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (devices_.empty()) return;
  TG_CHECK(!capturing(), "[empty_cache] cannot return memory to the driver while a CUDA graph is being captured");
  for (size_t i = 0; i < devices_.size(); ++i) release_cached_locked(static_cast<int>(i), false);
}

MempoolId CachingAllocator::create_pool() {
  std::lock_guard<std::mutex> lock(mutex_);
  return next_pool_id_++;
}

void CachingAllocator::release_pool(MempoolId pool) {
  TG_CHECK(pool != kDefaultMempool, "[release_mempool] the default pool cannot be released");
  std::lock_guard<std::mutex> lock(mutex_);
  TG_CHECK(pool < next_pool_id_, "[release_mempool] memory pool ", pool, " was never created");
  if (!released_.insert(pool).second) return;
  bool any = false;
  for (auto& d : devices_) {
    if (!d) continue;
    auto it = d->pools.find(pool);
    if (it == d->pools.end()) continue;
    it->second->released = true;
    any = any || it->second->stats.reserved_bytes > 0;
  }
  if (!any) return;
  TG_CHECK(!capturing(), "[release_mempool] cannot return memory to the driver while a CUDA graph is being captured");
  for (size_t i = 0; i < devices_.size(); ++i) release_cached_locked(static_cast<int>(i), true);
}

MemoryStats CachingAllocator::stats(int device) const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (device < 0 || devices_.size() <= static_cast<size_t>(device) || !devices_[static_cast<size_t>(device)])
    return {};
  return devices_[static_cast<size_t>(device)]->totals;
}

const CachingAllocator::Pool* CachingAllocator::find_pool(int device, MempoolId id) const {
  if (device < 0 || devices_.size() <= static_cast<size_t>(device) || !devices_[static_cast<size_t>(device)])
    return nullptr;
  const auto& pools = devices_[static_cast<size_t>(device)]->pools;
  auto it = pools.find(id);
  return it == pools.end() ? nullptr : it->second.get();
}

MemoryStats CachingAllocator::pool_stats(int device, MempoolId pool) const {
  std::lock_guard<std::mutex> lock(mutex_);
  const Pool* found = find_pool(device, pool);
  return found ? found->stats : MemoryStats{};
}

void CachingAllocator::reset_peak(int device) {
  std::lock_guard<std::mutex> lock(mutex_);
  DeviceState& d = device_state(device);
  d.totals.peak_allocated_bytes = d.totals.allocated_bytes;
  for (auto& [id, pool] : d.pools) pool->stats.peak_allocated_bytes = pool->stats.allocated_bytes;
}

void CachingAllocator::push_route(int device, MempoolId pool) { t_routes.emplace_back(device, pool); }

void CachingAllocator::pop_route() {
  if (!t_routes.empty()) t_routes.pop_back();
}

void CachingAllocator::set_log(std::vector<AllocationRecord>* log) { t_log = log; }

void CachingAllocator::hold_frees(std::vector<void*>* held) { t_held = held; }

std::pair<const void*, size_t> CachingAllocator::block_in_use(int device, MempoolId pool_id, const char* begin,
                                                              const char* end,
                                                              const std::vector<const void*>& ignored) const {
  std::lock_guard<std::mutex> lock(mutex_);
  const Pool* found = find_pool(device, pool_id);
  if (!found) return {nullptr, 0};
  const Pool& pool = *found;
  TG_CHECK(pool.tracks_addresses, "[cuda allocator] range queries need a private pool, got pool ", pool_id);
  auto it = pool.by_address.upper_bound(begin);
  if (it != pool.by_address.begin()) --it;
  for (; it != pool.by_address.end() && it->first < end; ++it) {
    const Block* b = it->second;
    if (b->allocated && b->ptr + b->size > begin &&
        std::find(ignored.begin(), ignored.end(), static_cast<const void*>(b->ptr)) == ignored.end())
      return {b->ptr, b->size};
  }
  return {nullptr, 0};
}

bool CachingAllocator::claim(int device, MempoolId pool_id, void* ptr, size_t nbytes) {
  const size_t size = round_up(std::max(nbytes, kMinBlock), kMinBlock);
  char* begin = static_cast<char*>(ptr);
  std::lock_guard<std::mutex> lock(mutex_);
  Pool& pool = pool_for(device, pool_id);
  TG_CHECK(pool.tracks_addresses, "[cuda allocator] only private pools can be claimed from, got pool ", pool_id);
  Block* block = block_at(pool, begin);
  if (!block || block->allocated || block->ptr + block->size < begin + size) return false;
  FreeList& free_list = block->small ? pool.small_free : pool.large_free;
  free_list.erase(block);
  if (block->ptr < begin) {
    Block* front = block;
    block = split_tail(pool, front, static_cast<size_t>(begin - front->ptr));
    free_list.insert(front);
  }
  if (block->size > size) free_list.insert(split_tail(pool, block, size));
  hand_out(pool, block);
  add(device_state(device).totals, static_cast<int64_t>(block->size));
  return true;
}

}  // namespace tg::cuda
