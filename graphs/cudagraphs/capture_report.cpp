// The TG_LOGS=capture line of a cudagraphs executor's run: work inside graph replays against work
// outside them. See Note [Strict capture] in docs/cudagraph_executor.md.
#include <sstream>

#include "graphs/cudagraphs/cudagraph_executor.h"
#include "graphs/logs.h"

namespace tg::graphs {

void CudaGraphExecutor::report_run() const {
  const RunReport& r = report_;
  const int outside = r.warmup_nodes + r.transfer_nodes + r.island_nodes + r.past_limit_nodes;
  std::ostringstream os;
  os << where() << ", call " << runs_ << ": inside graphs " << r.replayed_nodes << " node(s) in " << r.replays
     << " replay(s) (" << r.kernels << " kernels); outside graphs " << outside << " node(s) (" << r.warmup_nodes
     << " warm-up, " << r.transfer_nodes << " host transfer, " << r.island_nodes << " in islands, "
     << r.past_limit_nodes << " past the re-record limit); recorded " << r.recorded << "; islands: ";
  if (r.islands.empty()) os << "none";
  for (size_t k = 0; k < r.islands.size(); ++k) os << (k ? "; " : "") << r.islands[k];
  log_line("capture", os.str());
}

}  // namespace tg::graphs
