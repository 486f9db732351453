// compile()'s cache of specializations and the pipeline that builds one: trace the joint graph,
// partition it, optimize both halves, lower writes into inputs, build executors. See Note
// [Compile pipeline] in docs/compile_pipeline.md.
#include "graphs/compile.h"

#include <algorithm>
#include <atomic>
#include <iostream>
#include <sstream>

#include "autograd/op_node.h"
#include "graphs/calls/bucket_padding.h"
#include "graphs/calls/changing_dims.h"
#include "graphs/capture/functional_ops.h"
#include "graphs/capture/guards.h"
#include "graphs/cudagraphs/cudagraph_executor.h"
#include "graphs/cudagraphs/strict_capture.h"
#include "graphs/logs.h"
#include "graphs/passes/elementwise_fusion.h"
#include "graphs/passes/epilogue_fusion.h"
#include "graphs/passes/input_writes.h"
#include "graphs/passes/schedule_collectives.h"
#include "graphs/passes/stage_cpu_scalars.h"
#include "graphs/runtime/compiled_backward.h"
#include "graphs/runtime/cudagraph_step.h"
#include "graphs/runtime/interpreter.h"
#include "ops/core/dispatch.h"
#include "ops/elementwise/copy.h"
#include "ops/shape/view.h"
#include "tensor/grad_mode.h"

namespace tg::graphs {

// Which executors run the graphs.
enum class Backend { Eager, AotEager, CudaGraphs };

static Backend parse_backend(const std::string& name) {
  if (name == "eager") return Backend::Eager;
  if (name == "aot_eager") return Backend::AotEager;
  if (name == "cudagraphs") return Backend::CudaGraphs;
  TG_FAIL("[compile] unknown backend '", name, "'; expected 'eager', 'aot_eager' or 'cudagraphs'");
}

// One specialization of a compiled function: its guards and either graphs or an eager fallback.
struct CompiledEntry {
  Guards guards;
  bool eager = false;
  JointGraph joint;
  Partition partition;
  std::unique_ptr<Executor> forward;
  std::unique_ptr<Executor> backward;
  bool cudagraphs = false;  // executors are CUDA graph executors
  std::vector<bool> written_in_graph;  // per mutated input: the forward graph writes it itself
  Graph forward_graph;                 // the partition's forward graph as executed (reinplaced)
  std::shared_ptr<UnitTangents> unit_tangents = std::make_shared<UnitTangents>();  // for loss.backward()
  uint64_t last_use = 0;  // the State's clock at the latest call it served (for evict_lru)
};

struct CompiledFunction::State {
  GraphFn fn;
  CompileOptions options;
  Backend backend = Backend::AotEager;  // options.backend, parsed once
  PartitionerKind partitioner = PartitionerKind::Default;
  std::vector<std::shared_ptr<CompiledEntry>> entries;
  CompileCounters counters;
  bool warned_cache_limit = false;
  int id = 0;  // "function <id>" in strict capture errors and TG_LOGS=capture reports
  uint64_t clock = 0;  // calls so far, for least-recently-used eviction
  std::unique_ptr<BucketPlan> buckets;  // shape_buckets, validated (null without)
  std::shared_ptr<const PaddedCall*> padded = std::make_shared<const PaddedCall*>(nullptr);  // the bucketed call running
  ChangingDims changing_dims;  // tells once of a dim that keeps changing
};

namespace {

// An argument of this call, or a captured tensor (as locked for this call).
const Tensor& primal(const PrimalRef& p, const TensorList& args, const TensorList& captured) {
  return p.kind == InputKind::Argument ? args[static_cast<size_t>(p.index)] : captured[static_cast<size_t>(p.index)];
}

void record_fallback(CompileCounters& local, const std::string& reason) {
  update_counters(&local, [&](CompileCounters& c) {
    ++c.eager_fallbacks;
    c.fallback_reasons.push_back(reason);
  });
}

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

ExecutionPlan plan_execution(const CompiledFunction::State& s, const Partition& p, const TensorList& args) {
  ExecutionPlan plan;
  plan.device = cuda_device_of(p.forward);
  if (!plan.device) plan.device = cuda_device_of(p.backward);
  plan.cudagraphs = s.backend == Backend::CudaGraphs && plan.device.has_value();
  if (s.backend == Backend::CudaGraphs && !plan.cudagraphs) {
    if (s.options.strict_capture)
      strict_capture_failure("function " + std::to_string(s.id),
                             "the graphs hold no CUDA tensors: they would run with the interpreter, outside CUDA graphs");
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

// Traces s.fn for `args` into entry.joint. Returns false, with entry.eager set and the fallback
// counted, when this signature must run eagerly instead (data-dependent or untraceable code);
// fullgraph and strict_capture raise then instead.
bool trace_or_fall_back(CompiledFunction::State& s, CompiledEntry& entry, const TensorList& args) {
  const bool grad_before = is_grad_enabled();
  try {
    entry.joint = trace_joint(s.fn, args);
  } catch (const Error& e) {
    const bool data_dependent = dynamic_cast<const DataDependentError*>(&e) != nullptr;
    if (!data_dependent && !dynamic_cast<const TraceFallback*>(&e)) throw;
    set_grad_enabled(grad_before);
    if (s.options.fullgraph && !s.options.strict_capture) throw;
    const std::string reason =
        std::string(data_dependent ? "data-dependent operation while tracing: " : "untraceable: ") + e.what();
    if (s.options.strict_capture) {
      const std::string where = "function " + std::to_string(s.id);
      try {
        strict_capture_failure(where, "the call would run eagerly: " + reason);
      } catch (const Error& strict) {
        // Still a DataDependentError where it was one, for code that catches those.
        if (data_dependent) throw DataDependentError(strict.what());
        throw;
      }
    }
    entry.eager = true;
    record_fallback(s.counters, reason);
    log_line("recompiles", "falling back to eager for this input signature: " + reason);
    return false;
  }
  set_grad_enabled(grad_before);
  return true;
}

// Hands what tracing captured to the guards: captured tensors are held weakly from here on, so a
// rebinding is seen, not hidden, and the host values the trace read are guarded by value.
void guard_captured(CompiledEntry& entry) {
  entry.guards.add_captured(entry.joint.lifted);
  entry.guards.add_host_guards(std::move(entry.joint.host_guards));
  entry.joint.host_guards.clear();
  entry.joint.lifted.clear();
}

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
  // Partition: the joint graph split into a forward and a backward graph (saving or recomputing values).
  p = partition(entry->joint, s.partitioner);
  // Epilogue fusion: linear + activation, and their gradients, into the products' cuBLASLt epilogues.
  if (o.fuse_epilogues) fuse_epilogues(p, entry->joint, o.fuse_gradient_epilogues);
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

// Gives an output its own TensorImpl when it is a caller's tensor or repeats an earlier output,
// so attaching autograd state never touches the caller's tensor.
// Tells each reducer folded into the backward graph that the gradients about to reach its leaves are
// already reduced (its eager path must not reduce them again).
void announce_reduced_gradients(const JointGraph& joint) {
  for (const GradReduction& r : joint.reductions) {
    std::shared_ptr<GradReducer> reducer = r.reducer.lock();
    if (!reducer) continue;
    std::vector<std::shared_ptr<TensorImpl>> leaves;
    for (const auto& weak : r.leaves)
      if (auto leaf = weak.lock()) leaves.push_back(std::move(leaf));
    reducer->expect_reduced(leaves);
  }
}

Tensor fresh_handle(const Tensor& t) {
  const TensorImpl& i = *t.impl();
  return Tensor(std::make_shared<TensorImpl>(i.storage(), i.sizes(), i.strides(), i.storage_offset(), i.dtype()));
}

TensorList run_entry(const std::shared_ptr<CompiledEntry>& entry, const TensorList& args) {
  const JointGraph& joint = entry->joint;
  const Graph& fw = entry->forward_graph;
  const TensorList captured = entry->guards.lock_captured();
  TensorList fw_inputs;
  fw_inputs.reserve(fw.inputs.size());
  for (const GraphInput& in : fw.inputs) fw_inputs.push_back(primal({in.kind, in.index}, args, captured));
  TensorList results = entry->forward->run(std::move(fw_inputs));

  const size_t n_out = joint.num_user_outputs;
  const size_t n_mut = joint.mutated.size();
  {
    // Epilogue: the caller's tensors receive what the function wrote into them.
    NoGradGuard no_grad;
    for (size_t i = 0; i < n_mut; ++i) {
      if (!entry->written_in_graph.empty() && entry->written_in_graph[i]) continue;
      Tensor target = primal(joint.mutated[i], args, captured);
      target.copy_(results[n_out + i]);
    }
  }
  // Saved values get handles of their own: one that is also an output would otherwise hold, through
  // its grad_fn, the node that saves it, and a graph kept for double backward would never be freed.
  TensorList saved;
  saved.reserve(results.size() - n_out - n_mut);
  for (size_t i = n_out + n_mut; i < results.size(); ++i)
    saved.push_back(results[i].defined() ? fresh_handle(results[i]) : results[i]);

  TensorList outputs;
  outputs.reserve(n_out);
  std::vector<const TensorImpl*> seen;
  for (const Tensor& t : args) seen.push_back(t.impl());
  for (const Tensor& t : captured) seen.push_back(t.impl());
  for (size_t i = 0; i < n_out; ++i) {
    Tensor t = results[i];
    const auto& alias = joint.output_aliases[i];
    if (alias) {
      // Views of inputs stay views of the caller's tensors, even when functionalization wrote
      // elsewhere (the epilogue has written the final contents there). One that requires grad gets
      // its own handle, to which the compiled backward is attached below.
      Tensor view = primal(alias->source, args, captured).detach().as_strided(alias->sizes, alias->strides,
                                                                              alias->storage_offset);
      t = joint.output_requires_grad[i] ? fresh_handle(view) : view;
    } else if (std::find(seen.begin(), seen.end(), t.impl()) != seen.end()) {
      t = fresh_handle(t);
    }
    seen.push_back(t.impl());
    outputs.push_back(t);
  }

  const bool needs_backward = is_grad_enabled() && !joint.grad_primals.empty();
  if (!needs_backward) return outputs;
  std::vector<TensorMeta> tangent_metas;
  std::vector<size_t> diff_outputs;
  for (size_t i = 0; i < n_out; ++i) {
    if (!joint.output_requires_grad[i]) continue;
    diff_outputs.push_back(i);
    tangent_metas.push_back(contiguous_meta(outputs[i].sizes(), outputs[i].dtype(), outputs[i].device()));
  }
  if (diff_outputs.empty()) return outputs;
  auto runner = [entry](TensorList saved_values, const TensorList& tangents) -> TensorList {
    if (entry->joint.backward_refused) throw DoubleBackwardError();
    announce_reduced_gradients(entry->joint);
    TensorList inputs = std::move(saved_values);
    inputs.insert(inputs.end(), tangents.begin(), tangents.end());
    return entry->backward->run(std::move(inputs));
  };
  auto node = std::make_shared<CompiledBackward>(runner, std::move(saved), std::move(tangent_metas),
                                                 entry->cudagraphs ? pending_backward_token() : nullptr,
                                                 entry->unit_tangents);
  for (const PrimalRef& p : joint.grad_primals)
    node->mutable_next_edges().push_back(gradient_edge(primal(p, args, captured)));
  for (size_t k = 0; k < diff_outputs.size(); ++k) {
    AutogradMeta& meta = outputs[diff_outputs[k]].impl()->autograd();
    meta.grad_fn = node;
    meta.output_nr = static_cast<uint32_t>(k);
  }
  return outputs;
}

}  // namespace

CompiledFunction::CompiledFunction(GraphFn fn, CompileOptions options) : state_(std::make_shared<State>()) {
  state_->fn = std::move(fn);
  state_->options = std::move(options);
  state_->backend = parse_backend(state_->options.backend);
  state_->partitioner = parse_partitioner(state_->options.partitioner);
  TG_CHECK(state_->options.cache_limit >= 1, "[compile] cache_limit must be at least 1, got ",
           state_->options.cache_limit);
  TG_CHECK(!state_->options.strict_capture || state_->backend == Backend::CudaGraphs,
           "[compile] strict_capture needs the 'cudagraphs' backend, got backend '", state_->options.backend, "'");
  static std::atomic<int> next_id{0};
  state_->id = ++next_id;
  if (!state_->options.shape_buckets.empty()) {
    state_->buckets = std::make_unique<BucketPlan>(state_->options.shape_buckets, state_->options.input_names,
                                                   state_->options.backend == "cudagraphs");
    state_->fn = state_->buckets->wrap(std::move(state_->fn), state_->padded);
  }
}

TensorList CompiledFunction::call(const TensorList& args) {
  return call(CallArgs{args, input_display_names(args.size(), state_->options.input_names), {}});
}

namespace {

// Records the shapes of a call that compiles (or falls back) anew; tells once of a dim that keeps changing.
void watch_changing_dims(CompiledFunction::State& s, const CallArgs& call) {
  ChangingDims::Skip skip;
  if (s.buckets)
    skip = [&s](const std::string& name, int64_t dim, int64_t rank) { return s.buckets->bucketed(name, dim, rank); };
  std::optional<std::string> advice = s.changing_dims.observe(call, skip);
  if (!advice) return;
  std::cerr << "tapegraph warning: compiled function " << s.id << ": " << *advice << "\n";
  log_line("recompiles", *advice);
  update_counters(&s.counters, [&](CompileCounters& c) { c.changing_dims.push_back(*advice); });
}

// Drops the least recently used entry (its graphs go once no pending backward holds them).
void evict_least_recent(CompiledFunction::State& s) {
  auto lru = std::min_element(s.entries.begin(), s.entries.end(),
                              [](const auto& a, const auto& b) { return a->last_use < b->last_use; });
  log_line("recompiles", "cache_limit reached (" + std::to_string(s.options.cache_limit) +
                             " variants): evicting the least recently used one");
  s.entries.erase(lru);
  update_counters(&s.counters, [](CompileCounters& c) { ++c.evictions; });
}

// Runs one (padded) call: finds or compiles its entry and runs it. `reused` tells whether an entry
// compiled before served it.
TensorList run_call(CompiledFunction::State& s, const CallArgs& call, bool& reused) {
  const TensorList& args = call.tensors;
  reused = false;
  if (s.backend == Backend::Eager) return s.fn(args);
  std::shared_ptr<CompiledEntry> entry;
  std::optional<std::string> reason;
  for (auto it = s.entries.begin(); it != s.entries.end();) {
    reason = (*it)->guards.check(args, call.host);
    if (!reason) {
      entry = *it;
      break;
    }
    // An entry whose captured tensor is gone can never apply again: drop it and its graphs, so a
    // loop that rebinds its weights retraces instead of filling the cache and running eagerly.
    if (!(*it)->guards.captured_alive()) {
      it = s.entries.erase(it);
      continue;
    }
    ++it;
  }
  reused = entry != nullptr;
  if (!entry) {
    watch_changing_dims(s, call);
    const bool lru = s.options.evict_lru || s.buckets;
    if (static_cast<int>(s.entries.size()) >= s.options.cache_limit && lru) evict_least_recent(s);
    if (static_cast<int>(s.entries.size()) >= s.options.cache_limit) {
      if (s.options.strict_capture)
        strict_capture_failure("function " + std::to_string(s.id),
                               "the call would run eagerly: cache_limit reached (" + std::to_string(s.options.cache_limit) +
                                   " compiled variants)" + (reason ? "; this call's guard failure: " + *reason : std::string()));
      if (!s.warned_cache_limit) {
        std::cerr << "tapegraph warning: compiled function hit its cache limit (" << s.options.cache_limit
                  << " variants); further new input signatures run eagerly\n";
        s.warned_cache_limit = true;
      }
      record_fallback(s.counters, "cache_limit reached (" + std::to_string(s.options.cache_limit) + ")");
      return s.fn(args);
    }
    if (reason) {
      update_counters(&s.counters, [&](CompileCounters& c) {
        ++c.recompiles;
        c.recompile_reasons.push_back(*reason);
      });
      log_line("recompiles", "recompiling: " + *reason);
    }
    entry = build_entry(s, call);
    s.entries.push_back(entry);
  }
  entry->last_use = ++s.clock;
  if (entry->eager) return s.fn(args);
  update_counters(&s.counters, [](CompileCounters& c) { ++c.compiled_calls; });
  TensorList outputs = run_entry(entry, args);
  set_grad_enabled(entry->joint.grad_enabled_after);
  return outputs;
}

}  // namespace

TensorList CompiledFunction::call(const CallArgs& call) {
  State& s = *state_;
  bool reused = false;
  if (!s.buckets) return run_call(s, call, reused);
  // See Note [Shape buckets]: pad, run the variant of the padded shapes, narrow the outputs back.
  PaddedCall padded = s.buckets->pad(call);
  struct Current {
    std::shared_ptr<const PaddedCall*> slot;
    const PaddedCall* previous;
    ~Current() { *slot = previous; }
  } current{s.padded, *s.padded};
  *s.padded = &padded;
  TensorList outputs = run_call(s, padded.call, reused);
  update_counters(&s.counters, [&](CompileCounters& c) {
    ++c.bucketed_calls;
    c.bucket_hits += reused ? 1 : 0;
    c.padded_calls += padded.padded ? 1 : 0;
  });
  return s.buckets->narrow_outputs(std::move(outputs), padded);
}

const CompileCounters& CompiledFunction::counters() const { return state_->counters; }

ExportedForward::ExportedForward(const GraphFn& fn, const TensorList& sample_inputs) {
  for (const Tensor& t : sample_inputs) input_metas_.push_back(meta_of(t));
  NoGradGuard no_grad;  // trace_joint = false: no backward is traced
  joint_ = std::make_shared<JointGraph>(trace_joint(fn, sample_inputs));
  TG_CHECK(joint_->grad_primals.empty(), "[export] the function turned grad mode on; an exported forward graph "
           "cannot hold a backward");
}

TensorList ExportedForward::operator()(const TensorList& inputs) const {
  TG_CHECK(inputs.size() == input_metas_.size(), "[export] expected ", input_metas_.size(), " inputs, got ",
           inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const TensorMeta& m = input_metas_[i];
    TG_CHECK(inputs[i].sizes() == m.sizes && inputs[i].dtype() == m.dtype && inputs[i].device() == m.device,
             "[export] input ", i, " was exported as ", shape_str(m.sizes), " ", dtype_name(m.dtype), " on ",
             m.device.str(), ", got ", shape_str(inputs[i].sizes()), " ", dtype_name(inputs[i].dtype()), " on ",
             inputs[i].device().str());
  }
  // Node by node through the dispatcher, as eager code: it records the tape and can be traced.
  const Graph& g = joint_->graph;
  std::vector<Tensor> env(g.values.size());
  for (const GraphInput& in : g.inputs) env[static_cast<size_t>(in.value)] = primal({in.kind, in.index}, inputs, joint_->lifted);
  for (const GraphNode& node : g.nodes) {
    TensorList node_inputs;
    for (ValueId v : node.inputs) node_inputs.push_back(env[static_cast<size_t>(v)]);
    TensorList outs = dispatch(node.op, std::move(node_inputs));
    for (size_t k = 0; k < node.outputs.size(); ++k) env[static_cast<size_t>(node.outputs[k])] = outs[k];
  }
  TensorList results;
  for (ValueId v : g.outputs) results.push_back(env[static_cast<size_t>(v)]);
  const size_t n_out = joint_->num_user_outputs;
  NoGradGuard no_grad;
  for (size_t m = 0; m < joint_->mutated.size(); ++m) {
    Tensor target = primal(joint_->mutated[m], inputs, joint_->lifted);
    target.copy_(results[n_out + m]);
  }
  results.resize(n_out);
  return results;
}

ExportedForward export_forward(const GraphFn& fn, const TensorList& sample_inputs) {
  return ExportedForward(fn, sample_inputs);
}


const JointGraph* CompiledFunction::last_joint() const {
  for (auto it = state_->entries.rbegin(); it != state_->entries.rend(); ++it)
    if (!(*it)->eager) return &(*it)->joint;
  return nullptr;
}

const Partition* CompiledFunction::last_partition() const {
  for (auto it = state_->entries.rbegin(); it != state_->entries.rend(); ++it)
    if (!(*it)->eager) return &(*it)->partition;
  return nullptr;
}

}  // namespace tg::graphs
