// See Note [Compile pipeline] in docs/compile_pipeline.md.
#include "graphs/counters.h"

namespace tg::graphs {

CompileCounters& global_counters() {
  static CompileCounters counters;
  return counters;
}

void reset_global_counters() { global_counters() = CompileCounters{}; }

}  // namespace tg::graphs
