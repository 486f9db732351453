// Host memory for CPU storages: 64-byte aligned blocks, kept for reuse when freed.
#pragma once

#include <cstddef>
#include <memory>
#include <utility>

#include "tensor/memory/allocator.h"

namespace tg {

// Whether this build keeps freed blocks for reuse: not under AddressSanitizer, so every use
// after free is still reported there.
#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kCpuAllocatorReusesBlocks = false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool kCpuAllocatorReusesBlocks = false;
#else
inline constexpr bool kCpuAllocatorReusesBlocks = true;
#endif
#else
inline constexpr bool kCpuAllocatorReusesBlocks = true;
#endif

// The CPU allocator. Requests of up to 32 MiB are rounded up to a size class (powers of two up to
// 4 KiB, quarter octaves above) and, when freed through deallocate_sized(), kept in a per-thread
// cache for the next request of their class: 16 blocks per class up to 4 KiB, 128 MiB in all above.
// A tiny op's output then costs no trip to malloc, and a training step reuses the pages of the last
// one. Larger requests go straight to aligned malloc and free.
Allocator* cpu_allocator();

// A host block of at least `nbytes` (64-byte aligned) from the CPU allocator's per-thread cache.
void* host_allocate(size_t nbytes);
// Returns a block of host_allocate(nbytes).
void host_deallocate(void* ptr, size_t nbytes) noexcept;

// Frees every block the calling thread's cache keeps.
void cpu_empty_cache();
// Bytes the calling thread's cache keeps (blocks freed and not yet reused).
size_t cpu_cached_bytes();

// A standard allocator over host_allocate, for the small objects every op call creates (tensor and
// storage headers, tape nodes and their lists).
template <typename T>
struct SmallObjectAllocator {
  using value_type = T;
  SmallObjectAllocator() = default;
  template <typename U>
  SmallObjectAllocator(const SmallObjectAllocator<U>&) {}  // NOLINT: rebinding, as allocate_shared needs
  T* allocate(size_t n) { return static_cast<T*>(host_allocate(n * sizeof(T))); }
  void deallocate(T* p, size_t n) noexcept { host_deallocate(p, n * sizeof(T)); }
  template <typename U>
  bool operator==(const SmallObjectAllocator<U>&) const { return true; }
};

// std::make_shared with the object and its reference counts in the CPU allocator's cache.
template <typename T, typename... Args>
std::shared_ptr<T> make_shared_small(Args&&... args) {
  return std::allocate_shared<T>(SmallObjectAllocator<T>(), std::forward<Args>(args)...);
}

}  // namespace tg
