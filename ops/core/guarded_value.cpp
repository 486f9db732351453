#include "ops/core/guarded_value.h"

#include "ops/core/dispatch.h"

namespace tg {

void record_host_guard(HostGuard guard) {
  if (OpObserver* obs = current_op_observer()) obs->on_host_guard(std::move(guard));
}

bool is_tracing() { return current_op_observer() != nullptr; }

}  // namespace tg
