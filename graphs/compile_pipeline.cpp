// The compile of one variant: build_entry, the compile pipeline, and the helpers it calls that are
// no passes (how the graphs run, building the executors, reporting). See Note [Compile pipeline] in
// docs/compile_pipeline.md.
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "graphs/compiled_entry.h"
#include "graphs/cudagraphs/cudagraph_executor.h"
#include "graphs/cudagraphs/strict_capture.h"
#include "graphs/logs.h"
#include "graphs/passes/cast_batching.h"
#include "graphs/passes/float32_gradients.h"
#include "graphs/passes/elementwise_fusion.h"
#include "graphs/passes/epilogue_fusion.h"
#include "graphs/passes/input_writes.h"
#include "graphs/passes/lm_head_fusion.h"
#include "graphs/passes/norm_fusion.h"
#include "graphs/passes/schedule_collectives.h"
#include "graphs/passes/split_gradients.h"
#include "graphs/passes/stage_cpu_scalars.h"
#include "graphs/runtime/cudagraph_step.h"
#include "graphs/runtime/interpreter.h"

namespace tg::graphs {
namespace {

// The CUDA device a graph computes on, if any.
std::optional<Device> cuda_device_of(const Graph& g) {
  for (const Value& v : g.values)
    if (v.meta.device.is_cuda()) return v.meta.device;
  return std::nullopt;
}

// How an entry's graphs run: the device of their CUDA work, whether CUDA graphs record them, and
// which forward inputs the executor reads from the caller's memory (CUDA graphs copy the others
// into buffers of their own, so writes into those must reach the caller through the epilogue).
struct ExecutionPlan {
  std::optional<Device> device;
  bool cudagraphs = false;
  std::vector<bool> read_in_place;  // per forward graph input
};

// Decides how the partition's graphs run for this call (`args`: the call's tensors).
ExecutionPlan plan_execution(const CompiledFunction::State& s, const Partition& p, const TensorList& args) {
  ExecutionPlan plan;
  plan.device = cuda_device_of(p.forward);
  if (!plan.device) plan.device = cuda_device_of(p.backward);
  plan.cudagraphs = s.backend == Backend::CudaGraphs && plan.device.has_value();
  if (s.backend == Backend::CudaGraphs && !plan.cudagraphs) {
    if (s.options.strict_capture)
      strict_capture_failure("function " + std::to_string(s.id), "the graphs hold no CUDA tensors: they would run "
                             "with the interpreter, outside CUDA graphs");
    log_line("cudagraphs", "no CUDA tensors in the graph: running it with the interpreter");
  }
  for (const GraphInput& in : p.forward.inputs) {
    const bool arg_static = in.kind == InputKind::Argument &&
                            (is_static_address(args[static_cast<size_t>(in.index)]) ||
                             args[static_cast<size_t>(in.index)].impl()->storage()->is_borrowed());
    plan.read_in_place.push_back(!plan.cudagraphs || in.kind == InputKind::Lifted || arg_static);
  }
  return plan;
}

// Builds the executors only: interpreters over the entry's graphs for aot_eager (and where no CUDA
// work is), CUDA graph executors over the staged graphs for cudagraphs.
void make_executors(CompiledFunction::State& s, CompiledEntry& entry, ExecutionPlan plan, Graph staged_forward,
                    Graph staged_backward) {
  const Graph& fw = entry.forward_graph;
  const Graph& bw = entry.partition.backward;
  if (!plan.cudagraphs) {
    entry.forward = std::make_unique<Interpreter>(fw);
    entry.backward = std::make_unique<Interpreter>(bw);
    return;
  }
  entry.cudagraphs = true;
  auto recorder = cuda_graph_recorder(*plan.device);
  std::vector<bool> bw_static;
  for (const GraphInput& in : bw.inputs) bw_static.push_back(in.kind == InputKind::Saved);
  const CompileOptions& o = s.options;
  const CaptureChecks checks{.strict = o.strict_capture, .function = "function " + std::to_string(s.id)};
  auto forward = std::make_unique<CudaGraphExecutor>(std::move(staged_forward), std::move(plan.read_in_place),
                                                     recorder, &s.counters, "forward", /*starts_step=*/true,
                                                     o.cudagraph_max_recordings, DeviceType::CUDA, o.overlap_branches,
                                                     checks);
  auto backward = std::make_unique<CudaGraphExecutor>(std::move(staged_backward), std::move(bw_static), recorder,
                                                      &s.counters, "backward", /*starts_step=*/false,
                                                      o.cudagraph_max_recordings, DeviceType::CUDA, o.overlap_branches,
                                                      checks);
  if (log_enabled("capture")) {
    std::ostringstream os;
    os << checks.function << " compiled for CUDA graphs:";
    for (const CudaGraphExecutor* e : {forward.get(), backward.get()}) {
      const SegmentPlan& p = e->plan();
      os << (e == forward.get() ? " forward " : "; backward ") << p.captured_nodes << " node(s) captured, "
         << p.eager_nodes << " outside graphs in " << p.segments.size() << " segment(s)";
    }
    log_line("capture", os.str());
  }
  entry.forward = std::move(forward);
  entry.backward = std::move(backward);
}

// Counts a finished compilation and prints what TG_LOGS asks for.
void report_compilation(CompiledFunction::State& s, const CompiledEntry& entry) {
  update_counters(&s.counters, [&](CompileCounters& c) {
    ++c.compilations;
    c.forward_ops = entry.forward_graph.op_counts();
    c.backward_ops = entry.partition.backward.op_counts();
    c.saved_bytes = entry.partition.saved_bytes;
    c.recomputed_nodes = entry.partition.recomputed_nodes;
  });
  if (log_enabled("graphs")) {
    log_line("graphs", "joint graph:\n" + entry.joint.graph.to_text());
    log_line("graphs", "forward graph:\n" + entry.forward_graph.to_text());
    log_line("graphs", "backward graph:\n" + entry.partition.backward.to_text());
  }
  std::ostringstream os;
  os << s.options.partitioner << " partition: " << entry.partition.saved.size() << " saved values, "
     << entry.partition.saved_bytes << " bytes of activations, " << entry.partition.recomputed_nodes
     << " forward nodes recomputed in backward";
  log_line("partition", os.str());
}

// Hands what tracing captured to the guards: captured tensors are held weakly from here on, so a
// rebinding is seen, not hidden, and the host values the trace read are guarded by value.
void guard_captured(CompiledEntry& entry) {
  entry.guards.add_captured(entry.joint.lifted);
  entry.guards.add_host_guards(std::move(entry.joint.host_guards));
  entry.joint.host_guards.clear();
  entry.joint.lifted.clear();
}

}  // namespace

// The compile pipeline: everything from a call signature to the executors of its graphs, every pass
// one call, in the order they run. See Note [Compile pipeline] and graphs/passes/README.md.
std::shared_ptr<CompiledEntry> build_entry(CompiledFunction::State& s, const CallArgs& call) {
  const TensorList& args = call.tensors;
  const CompileOptions& o = s.options;
  auto entry = std::make_shared<CompiledEntry>();
  // Guards: the facts about this call that the graphs will be specialized on.
  entry->guards = Guards::capture(args, call.names, call.host);
  // Tracing: fn and its backward on fake tensors into one joint graph. Functionalization (writes become
  // out-of-place ops) and the dedupe of arguments that share memory happen as it traces.
  if (!trace_or_fall_back(s, *entry, args)) return entry;
  guard_captured(*entry);
  Partition& p = entry->partition;
  // LM-head fusion: linear -> cross_entropy and its backward as linear_cross_entropy computing its
  // gradients in the forward (on the joint graph, so the partitioner saves gradients, not logits).
  if (o.fuse_linear_cross_entropy_bytes > 0) fuse_linear_cross_entropy(entry->joint, o.fuse_linear_cross_entropy_bytes);
  // Partition: the joint graph split into a forward and a backward graph (saving or recomputing values).
  p = partition(entry->joint, s.partitioner);
  // Epilogue fusion: linear + activation, and their gradients, into the products' cuBLASLt epilogues.
  if (o.fuse_epilogues) fuse_epilogues(p, entry->joint, o.fuse_gradient_epilogues);
  // Split gradients: the zero-filled copies of a split's pieces and their sum become one cat (before
  // elementwise fusion, which would fuse the sum); where the pieces are the fused attention's
  // gradients, cuDNN writes them into the cat's result directly.
  if (o.merge_split_gradients) {
    merge_split_gradients(p.backward);
    pack_attention_gradients(p.backward);
  }
  // Norm fusion: a residual add and the layer_norm reading its sum (and a cast of its rows) become one
  // add_layer_norm node, and in the backward the norm's gradient, the residual gradient's sum and its
  // casts one add_layer_norm_backward (before elementwise fusion, which would take the adds and casts).
  if (o.fuse_add_layer_norm) {
    fuse_add_layer_norm(p.forward);
    fuse_add_layer_norm_backward(p.backward);
  }
  // Float32 gradients: parameter gradients that the backward rounds to 16 bits and casts back, written
  // in float32 by the products that make them (before the casts are batched).
  if (o.float32_parameter_gradients) widen_parameter_gradients(p.backward);
  // Parameter casts: autocast's casts of graph inputs, and of the gradients the backward returns,
  // batched into one multi_tensor_cast per dtype pair (before elementwise fusion takes casts).
  if (o.batch_parameter_casts) {
    batch_parameter_casts(p.forward, /*forward=*/true);
    batch_parameter_casts(p.backward, /*forward=*/false);
  }
  // Elementwise fusion: groups of elementwise CUDA ops into generated kernels.
  if (o.fuse_elementwise) fuse_elementwise(p);
  // Scheduling: collectives as early as their inputs allow; after the fusions, which change what a
  // collective waits for.
  schedule_collectives_early(p.forward);
  schedule_collectives_early(p.backward);
  // Which executors run the graphs and which forward inputs they read in place (the next pass needs it).
  ExecutionPlan plan = plan_execution(s, p, args);
  // Input writes: writes into inputs run in place again where unobservable (reinplace); with CUDA
  // graphs, the others into inputs read in place are written back inside the graph.
  entry->forward_graph = p.forward;
  entry->written_in_graph =
      lower_input_writes(entry->forward_graph, entry->joint, plan.read_in_place, /*write_back=*/plan.cudagraphs);
  // Staging, for CUDA graphs: CPU scalars that feed CUDA ops are copied to the device first, so those
  // ops are captured. Only the executors run the staged graphs; counters and logs see the unstaged.
  Graph staged_forward, staged_backward;
  if (plan.cudagraphs) {
    staged_forward = stage_cpu_scalars(entry->forward_graph);
    staged_backward = stage_cpu_scalars(p.backward);
  }
  make_executors(s, *entry, std::move(plan), std::move(staged_forward), std::move(staged_backward));
  report_compilation(s, *entry);
  return entry;
}

}  // namespace tg::graphs
