// See Note [CUDA graph memory pool] in docs/memory_pool.md.
#include "graphs/cudagraphs/output_buffers.h"

#include <algorithm>

namespace tg::graphs {

bool OutputBuffer::in_use() const {
  for (const auto& w : handed_out)
    if (auto s = w.lock(); s && !s->is_stale()) return true;
  return false;
}

bool OutputBuffer::held_only_by(const std::set<const StorageImpl*>& storages) const {
  for (const auto& w : handed_out)
    if (auto s = w.lock(); s && !s->is_stale() && !storages.count(s.get())) return false;
  return true;
}

void OutputBuffer::invalidate() {
  for (const auto& w : handed_out) {
    auto s = w.lock();
    if (!s || s->is_stale()) continue;
    s->invalidate("[cudagraphs] this tensor is an output of a compiled " + label +
                  " CUDA graph, and a later replay has overwritten its memory. Clone outputs you keep across "
                  "calls (out.clone()), or call tg::mark_step_begin() at the start of each iteration and stop "
                  "using the previous iteration's outputs. A parameter's .grad taken from a compiled backward is such "
                  "an output: reset grads with zero_grad() (set_to_none) before each backward.");
  }
  handed_out.clear();
}

Storage OutputBuffer::hand_out(const std::shared_ptr<void>& memory) {
  auto storage = std::make_shared<StorageImpl>(device, reinterpret_cast<void*>(range.begin),
                                               static_cast<int64_t>(range.end - range.begin), memory);
  handed_out.push_back(storage);
  owner = memory;
  return storage;
}

OutputBufferIndex& OutputBufferIndex::global() {
  static OutputBufferIndex* index = new OutputBufferIndex();
  return *index;
}

void OutputBufferIndex::add(const std::shared_ptr<OutputBuffer>& buffer) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (by_begin_.size() >= 2 * size_after_sweep_ + 64) {
    // Entries of destroyed recordings are dropped by queries that pass them; sweep the rest now and then.
    std::erase_if(by_begin_, [](const auto& entry) { return entry.second.expired(); });
    size_after_sweep_ = by_begin_.size();
  }
  longest_ = std::max(longest_, buffer->range.end - buffer->range.begin);
  by_begin_.emplace(buffer->range.begin, buffer);
}

std::vector<std::shared_ptr<OutputBuffer>> OutputBufferIndex::overlapping(
    const std::vector<MemoryRange>& ranges, const std::vector<std::shared_ptr<OutputBuffer>>& excluded) {
  std::vector<std::shared_ptr<OutputBuffer>> found;
  std::lock_guard<std::mutex> lock(mutex_);
  for (const MemoryRange& r : ranges) {
    const uintptr_t from = r.begin > longest_ ? r.begin - longest_ : 0;
    for (auto it = by_begin_.lower_bound(from); it != by_begin_.end() && it->first < r.end;) {
      auto buffer = it->second.lock();
      if (!buffer) {
        it = by_begin_.erase(it);
        continue;
      }
      ++it;
      if (buffer->owner.expired() || !buffer->range.overlaps(r)) continue;
      if (std::find(excluded.begin(), excluded.end(), buffer) != excluded.end()) continue;
      if (std::find(found.begin(), found.end(), buffer) == found.end()) found.push_back(std::move(buffer));
    }
  }
  return found;
}

}  // namespace tg::graphs
