// The cudagraphs executor's plan and its run: the graph cut into segments once, then per call each
// captured segment through its recordings (recording_policy.cpp) and each eager island through the
// interpreter. See Note [CUDA graph executor] in docs/cudagraph_executor.md.
#include "graphs/cudagraphs/cudagraph_executor.h"

#include <algorithm>
#include <set>
#include <sstream>

#include "graphs/cudagraphs/branch_streams.h"
#include "graphs/cudagraphs/segment_instance.h"
#include "graphs/logs.h"
#include "graphs/runtime/cudagraph_step.h"
#include "tensor/grad_mode.h"

namespace tg::graphs {

CudaGraphExecutor::CudaGraphExecutor(Graph graph, std::vector<bool> static_inputs,
                                     std::shared_ptr<GraphRecorder> recorder, CompileCounters* counters,
                                     std::string label, bool starts_step, int max_instances,
                                     DeviceType capture_on, bool overlap_branches, CaptureChecks checks)
    : graph_(std::move(graph)),
      recorder_(std::move(recorder)),
      counters_(counters),
      label_(std::move(label)),
      starts_step_(starts_step),
      max_instances_(max_instances),
      capture_on_(capture_on),
      checks_(std::move(checks)),
      plan_(plan_segments(graph_, capture_on)),
      interpreter_(graph_) {
  // Before anything is counted or run: a strict plan with an island never runs.
  if (checks_.strict) require_full_capture(graph_, plan_, where(), capture_on_);
  static_values_.assign(graph_.values.size(), false);
  for (size_t i = 0; i < graph_.inputs.size(); ++i)
    if (i < static_inputs.size() && static_inputs[i])
      static_values_[static_cast<size_t>(graph_.inputs[i].value)] = true;
  for (const auto& [id, t] : graph_.constants) static_values_[static_cast<size_t>(id)] = true;
  for (const Segment& seg : plan_.segments)
    if (seg.captured)
      for (ValueId v : seg.outputs) static_values_[static_cast<size_t>(v)] = true;
  if (overlap_branches)
    for (Segment& seg : plan_.segments)
      if (seg.captured) seg.on_branch = plan_branch_nodes(graph_, seg.nodes);

  // Values to drop after each segment: those whose last reader is in it (graph outputs are kept).
  std::vector<int> last_segment(graph_.values.size(), -1);
  for (size_t s = 0; s < plan_.segments.size(); ++s)
    for (int32_t n : plan_.segments[s].nodes)
      for (ValueId v : graph_.nodes[static_cast<size_t>(n)].inputs)
        if (v >= 0) last_segment[static_cast<size_t>(v)] = static_cast<int>(s);
  std::set<ValueId> keep(graph_.outputs.begin(), graph_.outputs.end());
  for (const auto& [id, t] : graph_.constants) keep.insert(id);
  release_after_segment_.resize(plan_.segments.size());
  for (size_t v = 0; v < last_segment.size(); ++v)
    if (last_segment[v] >= 0 && !keep.count(static_cast<ValueId>(v)))
      release_after_segment_[static_cast<size_t>(last_segment[v])].push_back(static_cast<ValueId>(v));

  // Inputs a segment may consume: static, last read in it, and read by no view there (a view may
  // live on after the segment).
  consumable_.resize(plan_.segments.size());
  for (size_t s = 0; s < plan_.segments.size(); ++s) {
    const Segment& seg = plan_.segments[s];
    std::set<ValueId> viewed;
    for (int32_t n : seg.nodes) {
      const GraphNode& node = graph_.nodes[static_cast<size_t>(n)];
      if (node.op->has(kView)) viewed.insert(node.inputs.begin(), node.inputs.end());
    }
    const std::set<ValueId> dying(release_after_segment_[s].begin(), release_after_segment_[s].end());
    for (ValueId v : seg.inputs) consumable_[s].push_back(is_static(v) && dying.count(v) && !viewed.count(v));
  }

  for (size_t s = 0; s < plan_.segments.size(); ++s) states_.push_back(std::make_unique<SegmentState>());
  count(&CompileCounters::captured_nodes, plan_.captured_nodes);
  count(&CompileCounters::eager_nodes, plan_.eager_nodes);
  for (const Segment& seg : plan_.segments)
    count(&CompileCounters::branch_nodes,
          static_cast<int>(std::count(seg.on_branch.begin(), seg.on_branch.end(), true)));
  for (const Segment& seg : plan_.segments) {
    count(seg.captured ? &CompileCounters::captured_segments : &CompileCounters::eager_segments);
    if (seg.captured) continue;
    count_skip(seg.reason, static_cast<int>(seg.nodes.size()));
    std::ostringstream os;
    os << label_ << " graph: " << seg.nodes.size() << " node(s) run eagerly between CUDA graphs due to " << seg.reason;
    log_line("cudagraphs", os.str());
  }
}

CudaGraphExecutor::~CudaGraphExecutor() = default;

void CudaGraphExecutor::count_skip(const std::string& reason, int n) {
  update_counters(counters_, [&](CompileCounters& c) { c.cudagraph_skips[reason] += n; });
}

bool CudaGraphExecutor::is_static(ValueId v) const { return static_values_[static_cast<size_t>(v)]; }

std::string CudaGraphExecutor::where() const {
  return (checks_.function.empty() ? "" : checks_.function + " ") + label_ + " graph";
}

TensorList CudaGraphExecutor::run(TensorList inputs) {
  TG_CHECK(inputs.size() == graph_.inputs.size(), "[cudagraphs] graph expects ", graph_.inputs.size(),
           " inputs, got ", inputs.size());
  if (starts_step_) begin_forward_call();
  NoGradGuard no_grad;
  std::vector<Tensor> env(graph_.values.size());
  for (const auto& [id, t] : graph_.constants) env[static_cast<size_t>(id)] = t;
  for (size_t i = 0; i < inputs.size(); ++i) env[static_cast<size_t>(graph_.inputs[i].value)] = std::move(inputs[i]);
  ++runs_;
  report_ = RunReport{};
  for (size_t s = 0; s < plan_.segments.size(); ++s) {
    const Segment& seg = plan_.segments[s];
    if (seg.captured) {
      run_captured(s, env);
    } else {
      int transfers = 0;
      for (int32_t n : seg.nodes)
        transfers += is_host_transfer(graph_, graph_.nodes[static_cast<size_t>(n)], capture_on_);
      report_.transfer_nodes += transfers;
      const int island = static_cast<int>(seg.nodes.size()) - transfers;
      if (island > 0) {
        report_.island_nodes += island;
        report_.islands.push_back("node " + std::to_string(seg.nodes.front()) + " (" +
                                  std::string(graph_.nodes[static_cast<size_t>(seg.nodes.front())].op->name()) + ", " +
                                  std::to_string(island) + " node(s)): " + seg.reason);
      }
      run_eagerly(seg, env);
    }
    for (ValueId v : release_after_segment_[s]) env[static_cast<size_t>(v)] = Tensor();
  }
  if (log_enabled("capture")) report_run();
  TensorList result;
  result.reserve(graph_.outputs.size());
  for (ValueId v : graph_.outputs) result.push_back(v >= 0 ? env[static_cast<size_t>(v)] : Tensor());
  return result;
}

void CudaGraphExecutor::run_eagerly(const Segment& seg, std::vector<Tensor>& env) const {
  // A segment's nodes are runs of consecutive graph nodes (constants hoisted to the front break them).
  for (size_t i = 0; i < seg.nodes.size();) {
    size_t j = i + 1;
    while (j < seg.nodes.size() && seg.nodes[j] == seg.nodes[j - 1] + 1) ++j;
    interpreter_.run_nodes(env, static_cast<size_t>(seg.nodes[i]), static_cast<size_t>(seg.nodes[j - 1]) + 1);
    i = j;
  }
}

}  // namespace tg::graphs
