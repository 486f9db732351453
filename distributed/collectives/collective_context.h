// What a collective is for, so that a stalled one is reported by name ("all_reduce #37 (DDP bucket 2
// of 3, step 12)") rather than by its sequence number alone. See Note [Named hangs] in
// docs/data_parallel.md.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

namespace tg::distributed {

// Where a collective comes from: a label ("DDP bucket 2 of 3") and, where a training loop's step is
// known, the counter holding it (read when the collective is issued, so a collective that is a node
// of a compiled graph reports the step of the run that issued it, not of the trace).
struct CollectiveContext {
  std::string label;
  std::shared_ptr<const std::atomic<int64_t>> step;  // null: no step is known

  bool empty() const { return label.empty() && !step; }
  // "DDP bucket 2 of 3, step 12" (no step while the counter is still negative).
  std::string describe() const;
};

// While alive, the collectives this thread issues carry `context` (the innermost scope wins; the
// previous context is restored at its end). Collective ops keep the context they were created in,
// so graph nodes traced inside a scope carry it whenever the graph runs.
class CollectiveContextScope {
 public:
  explicit CollectiveContextScope(CollectiveContext context);
  ~CollectiveContextScope();
  CollectiveContextScope(const CollectiveContextScope&) = delete;
  CollectiveContextScope& operator=(const CollectiveContextScope&) = delete;

 private:
  CollectiveContext previous_;
};

// This thread's current context (empty outside every scope).
const CollectiveContext& current_collective_context();

// "all_reduce #37" followed by " (context)" when the context says anything.
std::string describe_collective(const char* name, int64_t sequence, const std::string& context);

}  // namespace tg::distributed
