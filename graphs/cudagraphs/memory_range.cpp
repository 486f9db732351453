// See Note [CUDA graph memory pool] in docs/memory_pool.md.
#include "graphs/cudagraphs/memory_range.h"

#include <algorithm>

namespace tg::graphs {

MemoryRange MemoryRange::of(const void* ptr, size_t nbytes) {
  const auto begin = reinterpret_cast<uintptr_t>(ptr);
  return {begin, begin + nbytes};
}

std::vector<MemoryRange> merge_ranges(std::vector<MemoryRange> ranges) {
  std::erase_if(ranges, [](const MemoryRange& r) { return r.empty(); });
  std::sort(ranges.begin(), ranges.end(), [](const MemoryRange& a, const MemoryRange& b) { return a.begin < b.begin; });
  std::vector<MemoryRange> merged;
  for (const MemoryRange& r : ranges) {
    if (!merged.empty() && r.begin <= merged.back().end) {
      merged.back().end = std::max(merged.back().end, r.end);
    } else {
      merged.push_back(r);
    }
  }
  return merged;
}

std::vector<MemoryRange> subtract_ranges(std::vector<MemoryRange> ranges, std::vector<MemoryRange> removed) {
  ranges = merge_ranges(std::move(ranges));
  removed = merge_ranges(std::move(removed));
  std::vector<MemoryRange> rest;
  size_t k = 0;
  for (MemoryRange r : ranges) {
    while (k < removed.size() && removed[k].end <= r.begin) ++k;
    for (size_t j = k; j < removed.size() && removed[j].begin < r.end; ++j) {
      if (removed[j].begin > r.begin) rest.push_back({r.begin, removed[j].begin});
      r.begin = std::max(r.begin, removed[j].end);
    }
    if (!r.empty()) rest.push_back(r);
  }
  return rest;
}

bool any_overlap(const std::vector<MemoryRange>& a, const std::vector<MemoryRange>& b) {
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    if (a[i].overlaps(b[j])) return true;
    if (a[i].end <= b[j].end) {
      ++i;
    } else {
      ++j;
    }
  }
  return false;
}

uintptr_t moved_address(uintptr_t address, const std::vector<AddressMove>& moves) {
  for (const AddressMove& m : moves)
    if (address >= m.from.begin && address < m.from.end) return m.to + (address - m.from.begin);
  return address;
}

}  // namespace tg::graphs
