// Output buffers of recorded CUDA graphs: the memory a replay writes for its callers, the tensors
// handed out over it, and a process-wide index for finding whose outputs a replay would overwrite.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <set>
#include <vector>

#include "graphs/cudagraphs/memory_range.h"
#include "tensor/memory/storage.h"

namespace tg::graphs {

// One output storage of a recorded graph. The memory belongs to the tensors handed out over it
// (through `owner`): when they all die it goes back to the pool, and the next replay claims it again.
struct OutputBuffer {
  MemoryRange range;
  Device device;
  std::string label;                                   // the compiled graph writing it ("forward", ...)
  std::weak_ptr<void> owner;                           // the memory, while any tensor over it lives
  std::vector<std::weak_ptr<StorageImpl>> handed_out;  // storages given out at the last replay
  uint64_t step = 0;                                   // step of the last replay

  // True when a caller still holds a valid tensor over this buffer.
  bool in_use() const;
  // True when callers hold tensors written in step `current`: overwriting them now is not allowed.
  bool needed_in(uint64_t current) const { return step == current && in_use(); }
  // True when every valid tensor over this buffer has one of `storages` (inputs a replay consumes).
  bool held_only_by(const std::set<const StorageImpl*>& storages) const;
  // Makes every tensor handed out over the buffer raise on use (the memory is about to be
  // overwritten); they stop holding the memory.
  void invalidate();
  // A storage over the buffer for callers, keeping `memory` (the buffer's memory) alive; it is
  // invalidated with the others by the next invalidate().
  Storage hand_out(const std::shared_ptr<void>& memory);
};

// The output buffers of every recorded graph, by address.
class OutputBufferIndex {
 public:
  // The process-wide index.
  static OutputBufferIndex& global();
  void add(const std::shared_ptr<OutputBuffer>& buffer);
  // Buffers with live memory overlapping `ranges` (sorted and disjoint), except those in `excluded`.
  std::vector<std::shared_ptr<OutputBuffer>> overlapping(const std::vector<MemoryRange>& ranges,
                                                         const std::vector<std::shared_ptr<OutputBuffer>>& excluded);

 private:
  std::mutex mutex_;
  std::multimap<uintptr_t, std::weak_ptr<OutputBuffer>> by_begin_;
  uintptr_t longest_ = 0;         // length of the longest buffer ever added
  size_t size_after_sweep_ = 0;  // entries left by the last sweep of expired ones
};

}  // namespace tg::graphs
