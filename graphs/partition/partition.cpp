// See Note [Partitioners] in docs/partitioners.md.
#include "graphs/partition/partition.h"

#include <algorithm>
#include <functional>
#include <set>
#include <unordered_map>

#include "graphs/capture/functional_ops.h"
#include "graphs/partition/max_flow.h"

namespace tg::graphs {
namespace {

int64_t bytes_of(const Value& v) { return shape_numel(v.meta.sizes) * dtype_size(v.meta.dtype); }

// Copies a subset of a joint graph's nodes into a new graph, renumbering values on first use.
class SubgraphBuilder {
 public:
  explicit SubgraphBuilder(const Graph& joint) : joint_(joint) {}

  void add_input(ValueId joint_id, InputKind kind, int32_t index) {
    graph_.add_input(map(joint_id), kind, index);
  }
  // Copies node n; with remap=false its outputs are already ids of the new graph (its inputs never are).
  void add_node(const GraphNode& n, bool remap = true) {
    std::vector<ValueId> ins, outs;
    for (ValueId v : n.inputs) ins.push_back(v < 0 ? -1 : map(v));
    for (ValueId v : n.outputs) outs.push_back(remap ? map(v) : v);
    graph_.add_node(n.op, std::move(ins), std::move(outs), n.phase, n.sequence_nr);
  }
  // A new value of the new graph with the metadata of joint value v.
  ValueId add_value_like(ValueId v, const std::string& stem) {
    const Value& val = joint_.values[static_cast<size_t>(v)];
    TensorMeta m = val.meta;
    m.strides = contiguous_strides(m.sizes);
    m.offset = 0;
    return graph_.add_value(m, stem + "_" + val.name);
  }
  void add_raw_output(ValueId new_id) { graph_.outputs.push_back(new_id); }
  void add_output(ValueId joint_id) { graph_.outputs.push_back(joint_id < 0 ? -1 : map(joint_id)); }
  Graph take() { return std::move(graph_); }

 private:
  ValueId map(ValueId joint_id) {
    auto it = ids_.find(joint_id);
    if (it != ids_.end()) return it->second;
    const Value& v = joint_.values[static_cast<size_t>(joint_id)];
    const ValueId id = graph_.add_value(v.meta, v.name);
    graph_.values[static_cast<size_t>(id)].requires_grad = v.requires_grad;
    auto c = joint_.constants.find(joint_id);
    if (c != joint_.constants.end()) graph_.constants[id] = c->second;
    ids_.emplace(joint_id, id);
    return id;
  }

  const Graph& joint_;
  Graph graph_;
  std::unordered_map<ValueId, ValueId> ids_;
};

// Node indices (in order) needed to compute `targets`, stopping at values in `available`.
std::vector<int32_t> needed_nodes(const Graph& g, const std::vector<ValueId>& targets,
                                  const std::set<ValueId>& available, bool forward_only) {
  std::vector<bool> needed(g.nodes.size(), false);
  std::vector<ValueId> stack;
  std::set<ValueId> seen;
  for (ValueId v : targets)
    if (v >= 0) stack.push_back(v);
  while (!stack.empty()) {
    const ValueId v = stack.back();
    stack.pop_back();
    if (!seen.insert(v).second || available.count(v)) continue;
    const int32_t p = g.values[static_cast<size_t>(v)].producer;
    if (p < 0) continue;
    const GraphNode& n = g.nodes[static_cast<size_t>(p)];
    if (forward_only && n.phase != Phase::Forward) continue;
    needed[static_cast<size_t>(p)] = true;
    for (ValueId in : n.inputs)
      if (in >= 0) stack.push_back(in);
  }
  std::vector<int32_t> order;
  for (size_t i = 0; i < needed.size(); ++i)
    if (needed[i]) order.push_back(static_cast<int32_t>(i));
  return order;
}

bool is_forward_value(const Graph& g, ValueId v) {
  const Value& val = g.values[static_cast<size_t>(v)];
  if (val.producer >= 0) return g.nodes[static_cast<size_t>(val.producer)].phase == Phase::Forward;
  for (const GraphInput& in : g.inputs)
    if (in.value == v) return in.kind == InputKind::Argument || in.kind == InputKind::Lifted;
  return false;  // constants
}

bool is_primal_input(const Graph& g, ValueId v) {
  for (const GraphInput& in : g.inputs)
    if (in.value == v) return in.kind == InputKind::Argument || in.kind == InputKind::Lifted;
  return false;
}

// Forward values read by the backward half (directly by backward nodes, or returned as grads).
std::vector<ValueId> boundary_values(const Graph& g, const std::vector<int32_t>& bw_nodes,
                                     const std::vector<ValueId>& grad_outputs) {
  std::set<ValueId> out;
  for (int32_t i : bw_nodes)
    for (ValueId v : g.nodes[static_cast<size_t>(i)].inputs)
      if (v >= 0 && is_forward_value(g, v)) out.insert(v);
  for (ValueId v : grad_outputs)
    if (v >= 0 && is_forward_value(g, v)) out.insert(v);
  return {out.begin(), out.end()};
}

// A reduction whose inputs hold over four times the bytes of its outputs (a global pool, a sum over
// a dim): recomputing it rereads much more than saving its result costs, so min_cut saves it, as
// PyTorch's min-cut partitioner does.
bool shrinks_fourfold(const Graph& g, const GraphNode& node) {
  if (node.op->has(kElementwise) || node.op->has(kView)) return false;
  int64_t in_bytes = 0, out_bytes = 0;
  for (ValueId u : node.inputs)
    if (u >= 0) in_bytes += bytes_of(g.values[static_cast<size_t>(u)]);
  for (ValueId v : node.outputs)
    if (v >= 0) out_bytes += bytes_of(g.values[static_cast<size_t>(v)]);
  return in_bytes > 4 * out_bytes;
}

// Note [Regathered parameters]: fully_shard's units gather their shards under tracing with
// `fsdp_regather` (distributed/fsdp/fsdp_gather.h) when they reshard after the forward. That collective
// reads only a graph input (the shard) and every rank runs the same backward graph, so running it
// again there is safe; it and the views of its result (the parameters) are then treated as values
// of a checkpoint region that never leave it: never saved, recomputed from the shard just before the
// first backward node that reads them. So the forward frees the gathered parameters after their last
// forward reader and the backward gathers them again, as eager fully_shard does.
void mark_regathered(const Graph& g, std::vector<bool>& inside) {
  std::vector<bool> regathered(g.values.size(), false);
  for (const GraphNode& n : g.nodes) {
    if (n.phase != Phase::Forward) continue;
    const bool gather = n.op->has(kCollective) && n.op->name() == "fsdp_regather";
    const int of = n.op->schema().view_of;
    const ValueId base = n.op->has(kView) && of >= 0 && static_cast<size_t>(of) < n.inputs.size()
                             ? n.inputs[static_cast<size_t>(of)]
                             : -1;
    const bool view = base >= 0 && regathered[static_cast<size_t>(base)];
    if (!gather && !view) continue;
    for (ValueId v : n.outputs)
      if (v >= 0) regathered[static_cast<size_t>(v)] = inside[static_cast<size_t>(v)] = true;
  }
}

// Note [Checkpoint regions]: tg::checkpoint() under tracing runs its function as usual and only
// tags the forward nodes it records with a region id (autograd/checkpoint.h); eager checkpointing's
// saved-tensor places would make the traced backward rerun the function as backward-phase nodes,
// with the random ops drawing fresh numbers at run time. Here a value made inside a region is never
// saved unless it leaves the region (read by a forward node outside it, or returned): the backward
// recomputes it from the region's inputs, compute-intensive ops included, as the eager backward
// does. Random draws, host syncs, device copies and collectives inside a region are the exception:
// recomputing them would draw other numbers or repeat their effects, so their results are saved.
// Nested regions are one region (the outermost); the backward graph runs each region's
// recomputation just before the first backward node that reads it, so only one region's
// activations are alive at a time.
std::vector<bool> checkpointed_values(const Graph& g) {
  std::vector<bool> inside(g.values.size(), false);
  for (const GraphNode& n : g.nodes) {
    if (n.phase != Phase::Forward || n.checkpoint_region < 0) continue;
    const Op& op = *n.op;
    if (op.has(kRandom) || op.has(kHostSync) || op.has(kDeviceCopy) || op.has(kCollective)) continue;
    for (ValueId v : n.outputs)
      if (v >= 0) inside[static_cast<size_t>(v)] = true;
  }
  for (const GraphNode& n : g.nodes) {
    if (n.phase != Phase::Forward) continue;
    for (ValueId u : n.inputs) {
      if (u < 0 || !inside[static_cast<size_t>(u)]) continue;
      const GraphNode& producer = g.nodes[static_cast<size_t>(g.values[static_cast<size_t>(u)].producer)];
      if (producer.checkpoint_region != n.checkpoint_region) inside[static_cast<size_t>(u)] = false;  // leaves
    }
  }
  mark_regathered(g, inside);
  for (ValueId v : g.outputs)
    if (v >= 0) inside[static_cast<size_t>(v)] = false;
  return inside;
}

// The default partitioner's saved values with checkpoint regions: boundary values made inside a
// region are replaced by the region values they are recomputed from.
std::vector<ValueId> checkpoint_frontier(const Graph& g, const std::vector<ValueId>& boundary,
                                         const std::vector<bool>& checkpointed) {
  std::set<ValueId> saved, seen;
  std::vector<ValueId> stack(boundary.begin(), boundary.end());
  while (!stack.empty()) {
    const ValueId v = stack.back();
    stack.pop_back();
    if (!seen.insert(v).second) continue;
    if (!checkpointed[static_cast<size_t>(v)]) {
      saved.insert(v);
      continue;
    }
    for (ValueId u : g.nodes[static_cast<size_t>(g.values[static_cast<size_t>(v)].producer)].inputs)
      if (u >= 0 && !g.constants.count(u)) stack.push_back(u);
  }
  return {saved.begin(), saved.end()};
}

// Min-cut choice of saved values: the cheapest set (in bytes) from which every boundary value can
// be recomputed with recomputable forward ops.
std::vector<ValueId> min_cut_saved(const Graph& g, const std::vector<ValueId>& boundary,
                                  const std::vector<bool>& checkpointed) {
  const int n = static_cast<int>(g.values.size());
  const int source = 2 * n, sink = 2 * n + 1;
  FlowNetwork net(2 * n + 2);
  auto in = [](ValueId v) { return 2 * v; };
  auto out = [](ValueId v) { return 2 * v + 1; };
  for (ValueId v = 0; v < n; ++v) {
    if (!is_forward_value(g, v)) continue;
    const Value& val = g.values[static_cast<size_t>(v)];
    if (is_primal_input(g, v)) {
      // Inputs are kept alive by the caller, so saving one costs (almost) nothing.
      net.add_edge(source, in(v), FlowNetwork::kInfinite);
      net.add_edge(in(v), out(v), 1);
      continue;
    }
    const GraphNode& producer = g.nodes[static_cast<size_t>(val.producer)];
    const bool in_region = checkpointed[static_cast<size_t>(v)];  // never saved, always recomputed
    net.add_edge(in(v), out(v), in_region ? FlowNetwork::kInfinite : std::max<int64_t>(bytes_of(val), 1));
    if (!in_region && (!is_recomputable(*producer.op) || shrinks_fourfold(g, producer))) {
      net.add_edge(source, in(v), FlowNetwork::kInfinite);
    } else {
      for (ValueId u : producer.inputs) {
        if (u < 0) continue;
        if (g.constants.count(u)) continue;  // constants are available in both halves
        net.add_edge(out(u), in(v), FlowNetwork::kInfinite);
      }
    }
  }
  for (ValueId v : boundary) net.add_edge(out(v), sink, FlowNetwork::kInfinite);
  net.max_flow(source, sink);
  // Of the cuts that save the fewest bytes, the one nearest the sink: it saves values as late as it
  // can and so recomputes the least (saving relu(x) and saving x cost the same; only the first is free).
  const std::vector<bool> reaches_sink = net.sink_side(sink);
  std::vector<ValueId> saved;
  for (ValueId v = 0; v < n; ++v) {
    if (!is_forward_value(g, v)) continue;
    if (!reaches_sink[static_cast<size_t>(in(v))] && reaches_sink[static_cast<size_t>(out(v))]) saved.push_back(v);
  }
  return saved;
}

}  // namespace

PartitionerKind parse_partitioner(const std::string& name) {
  if (name == "default") return PartitionerKind::Default;
  if (name == "min_cut") return PartitionerKind::MinCut;
  TG_FAIL("[compile] unknown partitioner '", name, "'; expected 'default' or 'min_cut'");
}

bool is_recomputable(const Op& op) {
  if (op.has(kComputeIntensive) || op.has(kRandom) || op.has(kDeviceCopy) || op.has(kHostSync) || op.has(kCollective)) return false;
  return true;
}

Partition partition(const JointGraph& joint, PartitionerKind kind) {
  const Graph& g = joint.graph;
  Partition part;
  const size_t n_fw_out = joint.num_user_outputs + joint.mutated.size();
  const std::vector<ValueId> fw_targets(g.outputs.begin(), g.outputs.begin() + static_cast<ptrdiff_t>(n_fw_out));
  const std::vector<ValueId> grad_outputs(g.outputs.begin() + static_cast<ptrdiff_t>(n_fw_out), g.outputs.end());

  // Backward nodes needed for the gradients, and the forward values they read.
  std::set<ValueId> nothing;
  std::vector<int32_t> bw_nodes;
  for (int32_t i : needed_nodes(g, grad_outputs, nothing, false))
    if (g.nodes[static_cast<size_t>(i)].phase == Phase::Backward) bw_nodes.push_back(i);
  const std::vector<ValueId> boundary = boundary_values(g, bw_nodes, grad_outputs);
  const std::vector<bool> checkpointed = checkpointed_values(g);
  const bool regions = std::find(checkpointed.begin(), checkpointed.end(), true) != checkpointed.end();
  if (kind == PartitionerKind::MinCut) part.saved = min_cut_saved(g, boundary, checkpointed);
  else part.saved = regions ? checkpoint_frontier(g, boundary, checkpointed) : boundary;
  const std::set<ValueId> saved_set(part.saved.begin(), part.saved.end());
  for (ValueId v : part.saved)
    if (!is_primal_input(g, v)) part.saved_bytes += bytes_of(g.values[static_cast<size_t>(v)]);

  // Forward graph.
  SubgraphBuilder fw(g);
  for (const GraphInput& in : g.inputs)
    if (in.kind == InputKind::Argument || in.kind == InputKind::Lifted) fw.add_input(in.value, in.kind, in.index);
  std::vector<ValueId> fw_all = fw_targets;
  fw_all.insert(fw_all.end(), part.saved.begin(), part.saved.end());
  // Random ops run even when nothing reads them: each advances the generator as in eager mode, so
  // the draws after it match eager's.
  for (const GraphNode& n : g.nodes)
    if (n.phase == Phase::Forward && n.op->has(kRandom)) fw_all.insert(fw_all.end(), n.outputs.begin(), n.outputs.end());
  for (int32_t i : needed_nodes(g, fw_all, nothing, true)) fw.add_node(g.nodes[static_cast<size_t>(i)]);
  // An input the function writes into is saved as a snapshot: the caller's tensor receives the
  // write when the forward returns, and the backward must still see the value it had before.
  std::set<ValueId> mutated_inputs;
  for (const PrimalRef& p : joint.mutated)
    for (const GraphInput& in : g.inputs)
      if (in.kind == p.kind && in.index == p.index) mutated_inputs.insert(in.value);
  for (ValueId v : fw_targets) fw.add_output(v);
  for (ValueId v : part.saved) {
    if (!mutated_inputs.count(v)) {
      fw.add_output(v);
      continue;
    }
    const ValueId snap = fw.add_value_like(v, "snapshot");
    fw.add_node(GraphNode{std::make_shared<const SnapshotOp>(), {v}, {snap}, Phase::Forward, -1}, /*remap=*/false);
    fw.add_raw_output(snap);
  }
  part.forward = fw.take();

  // Backward graph: saved values and tangents in, recomputed forward nodes, then backward nodes.
  SubgraphBuilder bw(g);
  for (size_t i = 0; i < part.saved.size(); ++i) bw.add_input(part.saved[i], InputKind::Saved, static_cast<int32_t>(i));
  for (const GraphInput& in : g.inputs)
    if (in.kind == InputKind::Tangent) bw.add_input(in.value, in.kind, in.index);
  std::vector<ValueId> recompute_targets;
  for (ValueId v : boundary)
    if (!saved_set.count(v) && !g.constants.count(v)) recompute_targets.push_back(v);
  const std::vector<int32_t> recompute = needed_nodes(g, recompute_targets, saved_set, true);
  part.recomputed_nodes = static_cast<int>(recompute.size());
  std::vector<int32_t> bw_order;
  if (!regions) {
    bw_order = recompute;
    bw_order.insert(bw_order.end(), bw_nodes.begin(), bw_nodes.end());
    std::sort(bw_order.begin(), bw_order.end());
  } else {
    // Each recomputed node just before the first node that reads it (see Note [Checkpoint regions]).
    std::vector<bool> pending(g.nodes.size(), false);
    for (int32_t i : recompute) pending[static_cast<size_t>(i)] = true;
    std::function<void(int32_t)> emit = [&](int32_t i) {
      for (ValueId u : g.nodes[static_cast<size_t>(i)].inputs) {
        const int32_t p = u < 0 ? -1 : g.values[static_cast<size_t>(u)].producer;
        if (p < 0 || !pending[static_cast<size_t>(p)]) continue;
        pending[static_cast<size_t>(p)] = false;
        emit(p);
      }
      bw_order.push_back(i);
    };
    for (int32_t i : bw_nodes) emit(i);
    for (int32_t i : recompute)  // read by no backward node: a forward value returned as a gradient
      if (pending[static_cast<size_t>(i)]) {
        pending[static_cast<size_t>(i)] = false;
        emit(i);
      }
  }
  for (int32_t i : bw_order) bw.add_node(g.nodes[static_cast<size_t>(i)]);
  for (ValueId v : grad_outputs) bw.add_output(v);
  part.backward = bw.take();
  return part;
}

}  // namespace tg::graphs
