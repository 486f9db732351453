// See Note [CUDA graph executor] in docs/cudagraph_executor.md.
#include "graphs/cudagraphs/segments.h"

#include <set>

namespace tg::graphs {

std::optional<std::string> capture_blocker(const Graph& graph, const GraphNode& node, DeviceType capture_on) {
  const std::string name(node.op->name());
  if (node.op->has(kHostSync)) return "incompatible op (" + name + ")";
  // CUDA graphs move random draws to fresh counters on every replay; other recorders cannot.
  if (node.op->has(kRandom) && capture_on != DeviceType::CUDA) return "random op (" + name + ")";
  if (name == "stage_to_device") return std::string("host-to-device input staging");
  // A constant made from host data inside the function (from_vector): its copy from pageable host
  // memory synchronizes, which a capture cannot hold.
  if (node.op->has(kDeviceCopy) && node.inputs.empty()) return "host data copied to the device (" + name + ")";
  auto check = [&](ValueId v) -> std::optional<std::string> {
    if (v < 0) return std::nullopt;
    const Device d = graph.values[static_cast<size_t>(v)].meta.device;
    if (d.type == capture_on) return std::nullopt;
    return (d.is_cpu() ? "cpu device (" : d.str() + " device (") + name + ")";
  };
  for (ValueId v : node.inputs)
    if (auto r = check(v)) return r;
  for (ValueId v : node.outputs)
    if (auto r = check(v)) return r;
  return std::nullopt;
}

bool is_host_transfer(const Graph& graph, const GraphNode& node, DeviceType capture_on) {
  if (!node.op->has(kDeviceCopy) || !mutated_inputs(node.op->schema()).empty()) return false;
  for (ValueId v : node.inputs)
    if (v >= 0 && graph.values[static_cast<size_t>(v)].producer >= 0) return false;
  for (ValueId v : node.outputs)
    if (graph.values[static_cast<size_t>(v)].meta.device.type != capture_on) return false;
  return true;
}

SegmentPlan plan_segments(const Graph& graph, DeviceType capture_on) {
  SegmentPlan plan;
  // Blocked nodes without inputs and host transfers (their inputs exist before any node runs) run
  // first, so they do not cut a graph in two.
  std::vector<std::optional<std::string>> blockers;
  std::vector<size_t> order, rest;
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    blockers.push_back(capture_blocker(graph, graph.nodes[i], capture_on));
    const bool hoisted = graph.nodes[i].inputs.empty() || is_host_transfer(graph, graph.nodes[i], capture_on);
    (blockers.back() && hoisted ? order : rest).push_back(i);
  }
  order.insert(order.end(), rest.begin(), rest.end());
  for (size_t i : order) {
    const std::optional<std::string>& blocker = blockers[i];
    const bool captured = !blocker.has_value();
    if (plan.segments.empty() || plan.segments.back().captured != captured) {
      Segment next;
      next.captured = captured;
      next.reason = blocker.value_or("");
      plan.segments.push_back(std::move(next));
    }
    plan.segments.back().nodes.push_back(static_cast<int32_t>(i));
    if (captured) {
      ++plan.captured_nodes;
    } else {
      ++plan.eager_nodes;
      ++plan.skips[*blocker];
    }
  }
  // Inputs and outputs of each segment.
  std::vector<int> segment_of(graph.nodes.size());
  for (size_t s = 0; s < plan.segments.size(); ++s)
    for (int32_t n : plan.segments[s].nodes) segment_of[static_cast<size_t>(n)] = static_cast<int>(s);
  std::vector<std::set<ValueId>> ins(plan.segments.size()), outs(plan.segments.size());
  auto producer_segment = [&](ValueId v) {
    const int32_t p = graph.values[static_cast<size_t>(v)].producer;
    return p < 0 ? -1 : segment_of[static_cast<size_t>(p)];
  };
  for (size_t s = 0; s < plan.segments.size(); ++s) {
    for (int32_t n : plan.segments[s].nodes) {
      for (ValueId v : graph.nodes[static_cast<size_t>(n)].inputs) {
        if (v < 0) continue;
        const int ps = producer_segment(v);
        if (ps == static_cast<int>(s)) continue;
        ins[s].insert(v);
        if (ps >= 0) outs[static_cast<size_t>(ps)].insert(v);
      }
    }
  }
  for (ValueId v : graph.outputs) {
    if (v < 0) continue;
    const int ps = producer_segment(v);
    if (ps >= 0) outs[static_cast<size_t>(ps)].insert(v);
  }
  for (size_t s = 0; s < plan.segments.size(); ++s) {
    plan.segments[s].inputs.assign(ins[s].begin(), ins[s].end());
    plan.segments[s].outputs.assign(outs[s].begin(), outs[s].end());
  }
  return plan;
}

}  // namespace tg::graphs
