// See Note [Compile pipeline] in docs/compile_pipeline.md.
#include "graphs/counters.h"

namespace tg::graphs {

namespace detail {

CompileCounters& process_counters() {
  static CompileCounters counters;
  return counters;
}

std::mutex& process_counters_mutex() {
  static std::mutex m;
  return m;
}

}  // namespace detail

CompileCounters global_counters() {
  const std::lock_guard<std::mutex> lock(detail::process_counters_mutex());
  return detail::process_counters();
}

void reset_global_counters() {
  const std::lock_guard<std::mutex> lock(detail::process_counters_mutex());
  detail::process_counters() = CompileCounters{};
}

}  // namespace tg::graphs
