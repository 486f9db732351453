// Strict capture (CompileOptions::strict_capture): what counts as work outside CUDA graphs, and the
// errors that name it. See Note [Strict capture] in docs/cudagraph_executor.md.
#pragma once

#include <string>

#include "graphs/cudagraphs/segments.h"

namespace tg::graphs {

// What the cudagraphs executor checks and reports besides running the graph.
struct CaptureChecks {
  bool strict = false;   // raise on an eager island, an eager run of a captured segment or a re-record
  std::string function;  // names the compiled function in reports and errors ("function 2"); may be empty
};

// Why node `index` of `graph` cannot be captured, with what that means: "cpu device (_to_copy), a
// device-to-host copy".
std::string describe_blocked_node(const Graph& graph, int32_t index, DeviceType capture_on = DeviceType::CUDA);

// Raises a tg::Error naming the first nodes of `plan` that would run outside CUDA graphs (host
// transfers aside: is_host_transfer in segments.h; strict capture allows them as it allows the copies
// of non-static inputs into a graph's buffers, since they compute nothing and split no graph) and why; does nothing when there are none. `where`: "function 1 forward graph".
void require_full_capture(const Graph& graph, const SegmentPlan& plan, const std::string& where,
                          DeviceType capture_on = DeviceType::CUDA);

// Raises tg::Error("[cudagraphs] strict capture: <where>: <what>").
[[noreturn]] void strict_capture_failure(const std::string& where, const std::string& what);

}  // namespace tg::graphs
