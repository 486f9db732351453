// Host memory for CPU storages: 64-byte aligned blocks, with the small ones kept for reuse.
#pragma once

#include <cstddef>

#include "tensor/allocator.h"

namespace tg {

// Whether this build keeps freed small blocks for reuse: not under AddressSanitizer, so every use
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

// The CPU allocator. Blocks of up to 4 KiB are rounded up to a power of two and, when freed through
// deallocate_sized(), kept in a small per-thread cache for the next request of their size (a tiny
// op's output then costs no trip to malloc); larger blocks go straight to aligned malloc and free.
Allocator* cpu_allocator();

// A host block of at least `nbytes` (64-byte aligned) from the CPU allocator's per-thread cache.
void* allocate_small(size_t nbytes);
// Returns a block of allocate_small(nbytes).
void deallocate_small(void* ptr, size_t nbytes) noexcept;

// A standard allocator over allocate_small, for std::allocate_shared of the small objects every op
// call creates (tensor and storage headers, tape nodes).
template <typename T>
struct SmallObjectAllocator {
  using value_type = T;
  SmallObjectAllocator() = default;
  template <typename U>
  SmallObjectAllocator(const SmallObjectAllocator<U>&) {}  // NOLINT: rebinding, as allocate_shared needs
  T* allocate(size_t n) { return static_cast<T*>(allocate_small(n * sizeof(T))); }
  void deallocate(T* p, size_t n) noexcept { deallocate_small(p, n * sizeof(T)); }
  template <typename U>
  bool operator==(const SmallObjectAllocator<U>&) const { return true; }
};

}  // namespace tg
