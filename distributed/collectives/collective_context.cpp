// See Note [Named hangs] in docs/data_parallel.md.
#include "distributed/collectives/collective_context.h"

#include <utility>

namespace tg::distributed {
namespace {
thread_local CollectiveContext t_context;
}  // namespace

std::string CollectiveContext::describe() const {
  std::string out = label;
  if (step) {
    const int64_t s = step->load(std::memory_order_relaxed);
    if (s >= 0) out += (out.empty() ? "step " : ", step ") + std::to_string(s);
  }
  return out;
}

CollectiveContextScope::CollectiveContextScope(CollectiveContext context) : previous_(std::move(t_context)) {
  t_context = std::move(context);
}

CollectiveContextScope::~CollectiveContextScope() { t_context = std::move(previous_); }

const CollectiveContext& current_collective_context() { return t_context; }

std::string describe_collective(const char* name, int64_t sequence, const std::string& context) {
  std::string out = std::string(name) + " #" + std::to_string(sequence);
  if (!context.empty()) out += " (" + context + ")";
  return out;
}

}  // namespace tg::distributed
