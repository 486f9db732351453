// See Note [Named hangs] in docs/data_parallel.md.
#include "tensor/captured_work.h"

namespace tg {
namespace {
thread_local CapturedWorkScope* t_scope = nullptr;
}  // namespace

CapturedWorkScope::CapturedWorkScope() : previous_(t_scope) { t_scope = this; }

CapturedWorkScope::~CapturedWorkScope() { t_scope = previous_; }

CapturedWork CapturedWorkScope::take() { return std::exchange(work_, CapturedWork{}); }

void note_captured_work(const std::shared_ptr<ReplayWatcher>& watcher, std::shared_ptr<const CapturedNote> note) {
  if (!t_scope || !watcher) return;
  auto& watchers = t_scope->work_.watchers_;
  for (auto& [weak, notes] : watchers) {
    if (weak.lock() == watcher) {
      notes.push_back(std::move(note));
      return;
    }
  }
  watchers.emplace_back(watcher, std::vector<std::shared_ptr<const CapturedNote>>{std::move(note)});
}

void CapturedWork::replayed(const std::string& graph) const {
  for (const auto& [weak, notes] : watchers_)
    if (std::shared_ptr<ReplayWatcher> watcher = weak.lock()) watcher->replayed(graph, notes);
}

}  // namespace tg
