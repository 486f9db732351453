// See Note [Elementwise fusion] in docs/elementwise_fusion.md.
#include "graphs/passes/elementwise_fusion.h"

#include <algorithm>
#include <cstring>
#include <mutex>
#include <set>
#include <string>

#include "graphs/ir/graph_edit.h"
#include "graphs/logs.h"
#include "ops/elementwise/elementwise_math_source.h"
#include "ops/elementwise/fused_elementwise.h"
#include "ops/elementwise/fused_elementwise_codegen.h"

namespace tg::graphs {
namespace {

constexpr uint32_t kNeverFused = kView | kInPlace | kRandom | kDeviceCopy | kHostSync | kCollective | kFactory;

// The node's math when it may join a group: one output on a CUDA device, every input on that device.
bool fusible(const Graph& graph, const GraphNode& n, PointwiseMath& math) {
  if (!n.op->has(kElementwise) || (n.op->schema().flags & kNeverFused) != 0) return false;
  if (n.outputs.size() != 1 || n.outputs[0] < 0 || n.inputs.empty()) return false;
  if (n.inputs.size() > static_cast<size_t>(kMaxFusedInputs)) return false;
  const TensorMeta& out = graph.values[static_cast<size_t>(n.outputs[0])].meta;
  if (!out.device.is_cuda() || out.sizes.size() > static_cast<size_t>(kMaxFusedDims)) return false;
  std::vector<TensorMeta> metas;
  for (ValueId v : n.inputs) {
    if (v < 0) return false;
    const TensorMeta& m = graph.values[static_cast<size_t>(v)].meta;
    if (m.device != out.device || m.sizes.size() > static_cast<size_t>(kMaxFusedDims)) return false;
    metas.push_back(m);
  }
  return n.op->pointwise(metas, math);
}

// Values the group reads but does not compute, in order of first use (members in execution order).
std::vector<ValueId> external_inputs(const Graph& graph, const std::vector<int32_t>& members,
                                     const std::vector<int32_t>& group_of, int32_t group) {
  std::vector<int32_t> ordered = members;
  std::sort(ordered.begin(), ordered.end());
  std::vector<ValueId> ext;
  for (int32_t m : ordered)
    for (ValueId v : graph.nodes[static_cast<size_t>(m)].inputs) {
      const int32_t p = graph.values[static_cast<size_t>(v)].producer;
      if (p >= 0 && group_of[static_cast<size_t>(p)] == group) continue;
      if (std::find(ext.begin(), ext.end(), v) == ext.end()) ext.push_back(v);
    }
  return ext;
}

// The program of a group whose members (sorted) read `inputs` from outside.
FusedProgram program_of(const Graph& graph, const std::vector<int32_t>& members, const std::vector<ValueId>& inputs,
                        const std::vector<PointwiseMath>& maths) {
  FusedProgram program;
  for (ValueId v : inputs) program.input_dtypes.push_back(graph.values[static_cast<size_t>(v)].meta.dtype);
  for (int32_t m : members) {
    const GraphNode& n = graph.nodes[static_cast<size_t>(m)];
    FusedStep step;
    step.op = n.op;
    step.math = maths[static_cast<size_t>(m)];
    step.dtype = graph.values[static_cast<size_t>(n.outputs[0])].meta.dtype;
    for (ValueId v : n.inputs) {
      const int32_t p = graph.values[static_cast<size_t>(v)].producer;
      const auto member = std::find(members.begin(), members.end(), p);
      if (p >= 0 && member != members.end()) {
        step.operands.push_back({true, static_cast<int>(member - members.begin())});
      } else {
        step.operands.push_back({false, static_cast<int>(std::find(inputs.begin(), inputs.end(), v) - inputs.begin())});
      }
    }
    program.steps.push_back(std::move(step));
  }
  return program;
}

// TG_LOGS=fusion: the source of each kernel the node will need for the graph's layouts, once per signature.
void log_kernel_source(const Graph& graph, const GraphNode& node, const FusedProgram& program) {
  if (!log_enabled("fusion")) return;
  static std::mutex mutex;
  static std::set<std::string> logged;
  std::vector<TensorMeta> metas;
  for (ValueId v : node.inputs) metas.push_back(graph.values[static_cast<size_t>(v)].meta);
  const FusedGeometry geometry = fused_geometry(graph.values[static_cast<size_t>(node.outputs[0])].meta, metas);
  const std::string source = fused_kernel_source(program, geometry);
  std::lock_guard<std::mutex> lock(mutex);
  if (!logged.insert(source).second) return;
  // Every kernel holds ops/elementwise/elementwise_math.h; the log names it instead of repeating it.
  std::string shown = source;
  const size_t at = shown.find(kElementwiseMathSource);
  if (at != std::string::npos)
    shown.replace(at, std::strlen(kElementwiseMathSource), "#include \"ops/elementwise/elementwise_math.h\"\n");
  log_line("fusion", "generated kernel for " + program.describe() + ":\n" + shown);
}

}  // namespace

int fuse_elementwise_chains(Graph& graph) {
  const size_t n = graph.nodes.size();
  const std::vector<std::vector<int32_t>> readers = readers_of(graph);
  const std::vector<bool> is_output = graph_outputs(graph);
  std::vector<PointwiseMath> maths(n);
  std::vector<bool> ok(n);
  for (size_t i = 0; i < n; ++i) ok[i] = fusible(graph, graph.nodes[i], maths[i]);

  // Groups grow from their last op (the root) towards producers: a producer joins when every
  // reader of its result is already a member, so only the root's result leaves the group. A
  // producer refused because a reader was not a member yet is looked at again when that reader joins.
  std::vector<int32_t> group_of(n, -1);
  std::vector<bool> removed(n, false);
  int groups = 0;
  for (int32_t root = static_cast<int32_t>(n) - 1; root >= 0; --root) {
    if (!ok[static_cast<size_t>(root)] || group_of[static_cast<size_t>(root)] >= 0) continue;
    const Device device = graph.values[static_cast<size_t>(graph.nodes[static_cast<size_t>(root)].outputs[0])].meta.device;
    std::vector<int32_t> members{root};
    group_of[static_cast<size_t>(root)] = root;
    for (size_t w = 0; w < members.size(); ++w) {
      const std::vector<ValueId> inputs = graph.nodes[static_cast<size_t>(members[w])].inputs;
      for (ValueId v : inputs) {
        const int32_t p = graph.values[static_cast<size_t>(v)].producer;
        if (p < 0 || !ok[static_cast<size_t>(p)] || group_of[static_cast<size_t>(p)] >= 0) continue;
        if (is_output[static_cast<size_t>(v)] || graph.values[static_cast<size_t>(v)].meta.device != device) continue;
        const auto& rs = readers[static_cast<size_t>(v)];
        if (!std::all_of(rs.begin(), rs.end(), [&](int32_t r) { return group_of[static_cast<size_t>(r)] == root; }))
          continue;
        if (members.size() >= static_cast<size_t>(kMaxFusedOps)) continue;
        group_of[static_cast<size_t>(p)] = root;
        members.push_back(p);
        if (external_inputs(graph, members, group_of, root).size() > static_cast<size_t>(kMaxFusedInputs)) {
          group_of[static_cast<size_t>(p)] = -1;
          members.pop_back();
        }
      }
    }
    if (members.size() < 2) {
      group_of[static_cast<size_t>(root)] = -1;
      continue;
    }
    std::sort(members.begin(), members.end());
    const std::vector<ValueId> inputs = external_inputs(graph, members, group_of, root);
    FusedProgram program = program_of(graph, members, inputs, maths);
    GraphNode& node = graph.nodes[static_cast<size_t>(root)];
    for (int32_t m : members) {
      if (m == root) continue;
      removed[static_cast<size_t>(m)] = true;
      graph.values[static_cast<size_t>(graph.nodes[static_cast<size_t>(m)].outputs[0])].producer = -1;
    }
    node.inputs = inputs;
    log_kernel_source(graph, node, program);
    node.op = fused_elementwise_op(std::move(program));
    ++groups;
  }
  if (groups > 0) drop_nodes(graph, removed);
  return groups;
}

void fuse_elementwise(Partition& p) {
  const int forward = fuse_elementwise_chains(p.forward);
  const int backward = fuse_elementwise_chains(p.backward);
  if (forward + backward > 0)
    log_line("fusion", std::to_string(forward) + " forward and " + std::to_string(backward) +
                           " backward group(s) of elementwise ops fused into fused_elementwise");
}

}  // namespace tg::graphs
