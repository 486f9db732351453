// Counters compile() keeps, readable from C++: per compiled function, and for the whole process.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace tg::graphs {

// What happened to one compiled function (or to all of them, in global_counters()). Counts are
// sums; the fields marked "latest" describe the most recent compilation (of the function, or of
// the process). Both kinds change only through update_counters, so they mean the same in both.
struct CompileCounters {
  int compilations = 0;                      // graphs traced and partitioned
  int recompiles = 0;                        // compilations caused by a guard failure
  std::vector<std::string> recompile_reasons;
  int eager_fallbacks = 0;                   // calls run eagerly (data-dependent code or cache limit)
  std::vector<std::string> fallback_reasons;
  int compiled_calls = 0;                    // calls served by a compiled graph
  std::map<std::string, int> forward_ops;    // op counts of the latest forward graph
  std::map<std::string, int> backward_ops;   // op counts of the latest backward graph
  int64_t saved_bytes = 0;                   // activations saved for backward by the latest partition
  int recomputed_nodes = 0;                  // forward nodes recomputed in the latest backward graph
  int evictions = 0;                         // variants evicted, least recently used, at cache_limit
  std::vector<std::string> changing_dims;    // inputs' dims reported as changing size (at most one per function)

  // shape_buckets
  int bucketed_calls = 0;                    // calls of functions with shape buckets
  int bucket_hits = 0;                       // bucketed calls served by a variant compiled before
  int padded_calls = 0;                      // bucketed calls that padded some dim

  // cudagraphs backend
  int graphs_captured = 0;                   // CUDA graphs recorded (first recordings and re-records)
  int rerecords = 0;                         // recordings beyond the first of a segment
  int graph_updates = 0;                     // recorded graphs updated in place for moved static inputs
  int64_t input_copies = 0;                  // non-static inputs copied into a graph's own buffers
  int replays = 0;                           // CUDA graph launches
  int64_t replayed_kernels = 0;              // kernel launches made by those replays
  int warmups = 0;                           // segment runs done eagerly before recording
  int captured_segments = 0;                 // segments planned for capture
  int eager_segments = 0;                    // segments planned to run eagerly (islands)
  int captured_nodes = 0;                    // graph nodes inside captured segments
  int eager_nodes = 0;                       // graph nodes in eager islands
  int branch_nodes = 0;                      // captured nodes recorded on the branch stream (overlap_branches)
  std::map<std::string, int> cudagraph_skips;  // reason -> eager nodes (or segment runs) for that reason
};

// A copy of the process's counters: sums over every compiled function, "latest" fields of the last
// compilation. A copy, since compiled functions may run on several threads at once (ranks as threads).
CompileCounters global_counters();

namespace detail {
// The process's counters, and the mutex that guards every access to them.
CompileCounters& process_counters();
std::mutex& process_counters_mutex();
}  // namespace detail

// Applies `update` to a compiled function's counters (when given) and to the process's alike.
template <typename Update>
void update_counters(CompileCounters* local, Update&& update) {
  if (local) update(*local);
  const std::lock_guard<std::mutex> lock(detail::process_counters_mutex());
  update(detail::process_counters());
}

// Resets global_counters() (tests call this first, like torch._dynamo.utils.counters.clear()).
void reset_global_counters();

}  // namespace tg::graphs
