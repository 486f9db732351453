// Spans of device addresses: the memory a recorded graph writes, and the buffers it hands out.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace tg::graphs {

// The addresses [begin, end).
struct MemoryRange {
  uintptr_t begin = 0;
  uintptr_t end = 0;

  // The range of `nbytes` bytes from `ptr`.
  static MemoryRange of(const void* ptr, size_t nbytes);
  bool empty() const { return begin >= end; }
  // True when the two ranges share at least one address.
  bool overlaps(const MemoryRange& other) const { return begin < other.end && other.begin < end; }
  bool operator==(const MemoryRange&) const = default;
};

// A block of memory a recorded graph reads that now lives elsewhere: addresses in `from` move to
// the same offset from `to`.
struct AddressMove {
  MemoryRange from;
  uintptr_t to = 0;
};

// `address` moved by the first of `moves` whose range holds it, or unchanged.
uintptr_t moved_address(uintptr_t address, const std::vector<AddressMove>& moves);

// The same addresses as `ranges`, sorted, with touching or overlapping ranges merged.
std::vector<MemoryRange> merge_ranges(std::vector<MemoryRange> ranges);
// The addresses of `ranges` not in `removed` (both merged first); sorted and disjoint.
std::vector<MemoryRange> subtract_ranges(std::vector<MemoryRange> ranges, std::vector<MemoryRange> removed);
// True when some range of `a` overlaps some range of `b` (both sorted and disjoint).
bool any_overlap(const std::vector<MemoryRange>& a, const std::vector<MemoryRange>& b);

}  // namespace tg::graphs
