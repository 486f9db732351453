// Cutting a graph into CUDA-graph segments and eager islands.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "graphs/ir/graph.h"

namespace tg::graphs {

// A run of consecutive nodes that is either captured into one CUDA graph or run eagerly.
struct Segment {
  bool captured = false;
  std::vector<int32_t> nodes;   // indices into graph.nodes, in order
  std::string reason;           // eager segments: why their first node cannot be captured
  std::vector<ValueId> inputs;  // values the segment reads that are produced before it
  std::vector<ValueId> outputs; // values it produces that are read after it (or returned)
  // Captured segments: per node, recorded on the branch stream (graphs/cudagraphs/branch_streams.h).
  std::vector<bool> on_branch;
};

// The segments of a graph plus the skip reasons, counted.
struct SegmentPlan {
  std::vector<Segment> segments;
  std::map<std::string, int> skips;  // reason -> number of eager nodes with that reason
  int captured_nodes = 0;
  int eager_nodes = 0;
};

// Why `node` cannot be captured, in PyTorch's words where it has some ("cpu device (to_cpu)",
// "incompatible op (item)"); nullopt when it can.
// `capture_on` is the device type graphs are recorded on (CUDA; the CPU in tests of the decision logic).
std::optional<std::string> capture_blocker(const Graph& graph, const GraphNode& node,
                                           DeviceType capture_on = DeviceType::CUDA);

// True for a node that only copies data existing before the graph runs (graph inputs, constants, host
// data) onto the capture device: a staged CPU scalar, a host-data constant, a CPU argument or constant
// moved to the device. It cannot be captured (a copy from pageable host memory synchronizes) but
// computes nothing, so it runs in front of the graphs.
bool is_host_transfer(const Graph& graph, const GraphNode& node, DeviceType capture_on = DeviceType::CUDA);

// Cuts `graph` into maximal runs of capturable and non-capturable nodes; host transfers are moved to
// the front, so they do not cut a graph in two.
SegmentPlan plan_segments(const Graph& graph, DeviceType capture_on = DeviceType::CUDA);

}  // namespace tg::graphs
