// See Note [Strict capture] in docs/cudagraph_executor.md.
#include "graphs/cudagraphs/strict_capture.h"

#include "tensor/check.h"

namespace tg::graphs {

namespace {

// How many blocked nodes an error names before summing up the rest.
constexpr size_t kNamedNodes = 3;

Device device_of(const Graph& graph, ValueId v) { return graph.values[static_cast<size_t>(v)].meta.device; }

// What a blocked node does, in words.
std::string meaning(const Graph& graph, const GraphNode& node, DeviceType capture_on) {
  if (node.op->has(kHostSync)) return "reads a device value on the host";
  if (node.op->name() == "stage_to_device") return "copies a host scalar to the device";
  if (node.op->has(kRandom) && capture_on != DeviceType::CUDA) return "draws random numbers, which only CUDA graphs redraw on replay";
  if (node.op->has(kDeviceCopy)) {
    if (node.inputs.empty()) return "copies host data to the device";
    bool from_host = false, to_host = false;
    for (ValueId v : node.inputs)
      if (v >= 0 && device_of(graph, v).type != capture_on) from_host = true;
    for (ValueId v : node.outputs)
      if (device_of(graph, v).type != capture_on) to_host = true;
    if (to_host && !from_host) return capture_on == DeviceType::CUDA ? "a device-to-host copy" : "a copy off the capture device";
    if (from_host && !to_host) return capture_on == DeviceType::CUDA ? "a host-to-device copy" : "a copy onto the capture device";
  }
  return "computes outside the capture device";
}

}  // namespace

std::string describe_blocked_node(const Graph& graph, int32_t index, DeviceType capture_on) {
  const GraphNode& node = graph.nodes[static_cast<size_t>(index)];
  const std::string reason = capture_blocker(graph, node, capture_on).value_or("capturable");
  return reason + ", " + meaning(graph, node, capture_on);
}

void require_full_capture(const Graph& graph, const SegmentPlan& plan, const std::string& where, DeviceType capture_on) {
  std::vector<int32_t> blocked;
  for (const Segment& seg : plan.segments) {
    if (seg.captured) continue;
    for (int32_t n : seg.nodes)
      if (!is_host_transfer(graph, graph.nodes[static_cast<size_t>(n)], capture_on)) blocked.push_back(n);
  }
  if (blocked.empty()) return;
  std::string what;
  for (size_t k = 0; k < blocked.size() && k < kNamedNodes; ++k) {
    const int32_t n = blocked[k];
    if (k > 0) what += "; ";
    what += "node " + std::to_string(n) + " (" + std::string(graph.nodes[static_cast<size_t>(n)].op->name()) +
            ") would run outside CUDA graphs: " + describe_blocked_node(graph, n, capture_on);
  }
  if (blocked.size() > kNamedNodes) what += "; and " + std::to_string(blocked.size() - kNamedNodes) + " more node(s)";
  strict_capture_failure(where, what + " (TG_LOGS=graphs,cudagraphs prints the graph and every split)");
}

void strict_capture_failure(const std::string& where, const std::string& what) {
  TG_FAIL("[cudagraphs] strict capture: ", where.empty() ? "" : where + ": ", what);
}

}  // namespace tg::graphs
