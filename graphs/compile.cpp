// See Note [Compile pipeline] in docs/compile_pipeline.md.
#include "graphs/compile.h"

#include <iostream>
#include <sstream>

#include "autograd/grad_mode.h"
#include "autograd/op_node.h"
#include "graphs/compiled_backward.h"
#include "graphs/cudagraph_executor.h"
#include "graphs/cudagraph_step.h"
#include "graphs/elementwise_fusion.h"
#include "graphs/functional_ops.h"
#include "graphs/fusion.h"
#include "graphs/staging.h"
#include "graphs/guards.h"
#include "graphs/interpreter.h"
#include "graphs/logs.h"
#include "graphs/reinplace.h"
#include "graphs/schedule.h"
#include "ops/copy.h"
#include "ops/dispatch.h"
#include "ops/view.h"

namespace tg::graphs {

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
};

struct CompiledFunction::State {
  GraphFn fn;
  CompileOptions options;
  PartitionerKind partitioner = PartitionerKind::Default;
  std::vector<std::shared_ptr<CompiledEntry>> entries;
  CompileCounters counters;
  bool warned_cache_limit = false;
};

namespace {

// An argument of this call, or a captured tensor (as locked for this call).
const Tensor& primal(const PrimalRef& p, const TensorList& args, const TensorList& captured) {
  return p.kind == InputKind::Argument ? args[static_cast<size_t>(p.index)] : captured[static_cast<size_t>(p.index)];
}

void add_counts(std::map<std::string, int>& into, const std::map<std::string, int>& counts) {
  for (const auto& [name, n] : counts) into[name] += n;
}

void record_fallback(CompileCounters& local, const std::string& reason) {
  ++local.eager_fallbacks;
  local.fallback_reasons.push_back(reason);
  ++global_counters().eager_fallbacks;
  global_counters().fallback_reasons.push_back(reason);
}

// The CUDA device a graph computes on, if any.
std::optional<Device> cuda_device_of(const Graph& g) {
  for (const Value& v : g.values)
    if (v.meta.device.is_cuda()) return v.meta.device;
  return std::nullopt;
}

// Interpreters for aot_eager; CUDA graph executors for cudagraphs (interpreters where no CUDA work
// is). Writes into inputs run in place where unobservable (reinplace); for cudagraphs, remaining
// writes into inputs with fixed addresses are written back inside the graph.
void make_executors(CompiledFunction::State& s, CompiledEntry& entry, const TensorList& args) {
  const JointGraph& joint = entry.joint;
  if (s.options.fuse_epilogues) {
    Partition& p = entry.partition;
    const int relu = fuse_linear_relu(p.forward) + fuse_linear_relu(p.backward);
    const int gelu = fuse_linear_gelu_tanh(p.forward) + fuse_linear_gelu_tanh(p.backward);
    const int relu_bias = fuse_relu_backward_bias_grad(p.backward);
    const bool grads = s.options.fuse_gradient_epilogues;
    const int relu_mm = grads ? fuse_relu_mask_gradients(p, joint.num_user_outputs + joint.mutated.size()) : 0;
    const int gelu_mm = grads ? fuse_gelu_tanh_gradients(p.backward) : 0;
    const int weight_bias = grads ? fuse_weight_bias_grads(p.backward) : 0;
    if (relu + gelu + relu_bias + relu_mm + gelu_mm + weight_bias > 0)
      log_line("fusion", std::to_string(relu) + " linear + relu pair(s) fused into linear_relu, " + std::to_string(gelu) +
                             " linear + tanh gelu into linear_gelu_tanh, " + std::to_string(relu_bias) +
                             " relu gradient + bias gradient into relu_backward_bias_grad, then " + std::to_string(relu_mm) +
                             " of those and " + std::to_string(gelu_mm) + " tanh gelu gradient(s) into the product before them (" +
                             std::to_string(relu_mm) + " ReLU mask(s) saved), " + std::to_string(weight_bias) +
                             " weight + bias gradient pair(s) into linear_weight_bias_grad");
  }
  if (s.options.fuse_elementwise) {
    const int forward = fuse_elementwise_chains(entry.partition.forward);
    const int backward = fuse_elementwise_chains(entry.partition.backward);
    if (forward + backward > 0)
      log_line("fusion", std::to_string(forward) + " forward and " + std::to_string(backward) +
                             " backward group(s) of elementwise ops fused into fused_elementwise");
  }
  schedule_collectives_early(entry.partition.forward);
  schedule_collectives_early(entry.partition.backward);
  entry.forward_graph = entry.partition.forward;
  Graph& fw = entry.forward_graph;
  const Graph& bw = entry.partition.backward;
  const size_t n_out = joint.num_user_outputs;
  std::optional<Device> device = cuda_device_of(fw);
  if (!device) device = cuda_device_of(bw);
  const bool cudagraphs = s.options.backend == "cudagraphs" && device.has_value();

  // Which inputs the executor reads in place. CUDA graphs copy the others into their own buffers,
  // so a write into those must still reach the caller through the epilogue.
  std::vector<bool> fw_static;
  for (const GraphInput& in : fw.inputs) {
    const bool arg_static = in.kind == InputKind::Argument &&
                            (is_static_address(args[static_cast<size_t>(in.index)]) ||
                             args[static_cast<size_t>(in.index)].impl()->storage()->is_borrowed());
    fw_static.push_back(!cudagraphs || in.kind == InputKind::Lifted || arg_static);
  }
  std::vector<ValueId> written, finals;
  for (size_t m = 0; m < joint.mutated.size(); ++m) {
    ValueId v = -1;
    for (size_t i = 0; i < fw.inputs.size(); ++i)
      if (fw.inputs[i].kind == joint.mutated[m].kind && fw.inputs[i].index == joint.mutated[m].index && fw_static[i])
        v = fw.inputs[i].value;
    written.push_back(v);
    finals.push_back(fw.outputs[n_out + m]);
  }
  entry.written_in_graph = reinplace(fw, written, finals);

  if (!cudagraphs) {
    if (s.options.backend == "cudagraphs") log_line("cudagraphs", "no CUDA tensors in the graph: running it with the interpreter");
    entry.forward = std::make_unique<Interpreter>(fw);
    entry.backward = std::make_unique<Interpreter>(bw);
    return;
  }
  entry.cudagraphs = true;
  auto recorder = cuda_graph_recorder(*device);
  std::vector<bool> bw_static;
  for (const GraphInput& in : bw.inputs) bw_static.push_back(in.kind == InputKind::Saved);
  // Inputs with fixed addresses receive their remaining writes inside the graph (an optimizer
  // step's parameter updates are then part of its CUDA graph); others get the epilogue copy.
  for (size_t m = 0; m < joint.mutated.size(); ++m) {
    if (entry.written_in_graph[m]) continue;
    for (size_t i = 0; i < fw.inputs.size(); ++i) {
      const GraphInput& in = fw.inputs[i];
      if (in.kind != joint.mutated[m].kind || in.index != joint.mutated[m].index || !fw_static[i]) continue;
      const ValueId done = fw.add_value(fw.values[static_cast<size_t>(in.value)].meta, "written_back");
      fw.add_node(std::make_shared<const WriteBackOp>(), {in.value, finals[m]}, {done}, Phase::Forward, -1);
      entry.written_in_graph[m] = true;
    }
  }
  const CompileOptions& o = s.options;
  entry.forward = std::make_unique<CudaGraphExecutor>(stage_cpu_scalars(fw), std::move(fw_static), recorder, &s.counters,
                                                      "forward", /*starts_step=*/true, o.cudagraph_max_recordings,
                                                      DeviceType::CUDA, o.overlap_branches);
  entry.backward = std::make_unique<CudaGraphExecutor>(stage_cpu_scalars(bw), std::move(bw_static), recorder,
                                                       &s.counters, "backward", /*starts_step=*/false,
                                                       o.cudagraph_max_recordings, DeviceType::CUDA, o.overlap_branches);
}

std::shared_ptr<CompiledEntry> build_entry(CompiledFunction::State& s, const CallArgs& call) {
  const TensorList& args = call.tensors;
  auto entry = std::make_shared<CompiledEntry>();
  entry->guards = Guards::capture(args, call.names, call.host);
  const bool grad_before = is_grad_enabled();
  try {
    entry->joint = trace_joint(s.fn, args);
  } catch (const Error& e) {
    const bool data_dependent = dynamic_cast<const DataDependentError*>(&e) != nullptr;
    if (!data_dependent && !dynamic_cast<const TraceFallback*>(&e)) throw;
    set_grad_enabled(grad_before);
    if (s.options.fullgraph) throw;
    entry->eager = true;
    const std::string reason =
        std::string(data_dependent ? "data-dependent operation while tracing: " : "untraceable: ") + e.what();
    record_fallback(s.counters, reason);
    log_line("recompiles", "falling back to eager for this input signature: " + reason);
    return entry;
  }
  set_grad_enabled(grad_before);
  entry->guards.add_captured(entry->joint.lifted);
  entry->guards.add_host_guards(std::move(entry->joint.host_guards));
  entry->joint.host_guards.clear();
  // From here on captured tensors are held weakly, by the guards: a rebinding is seen, not hidden.
  entry->joint.lifted.clear();
  entry->partition = partition(entry->joint, s.partitioner);
  make_executors(s, *entry, args);

  CompileCounters& c = s.counters;
  ++c.compilations;
  ++global_counters().compilations;
  c.forward_ops = entry->forward_graph.op_counts();
  c.backward_ops = entry->partition.backward.op_counts();
  c.saved_bytes = entry->partition.saved_bytes;
  c.recomputed_nodes = entry->partition.recomputed_nodes;
  add_counts(global_counters().forward_ops, c.forward_ops);
  add_counts(global_counters().backward_ops, c.backward_ops);
  global_counters().saved_bytes = c.saved_bytes;
  global_counters().recomputed_nodes = c.recomputed_nodes;
  if (log_enabled("graphs")) {
    log_line("graphs", "joint graph:\n" + entry->joint.graph.to_text());
    log_line("graphs", "forward graph:\n" + entry->forward_graph.to_text());
    log_line("graphs", "backward graph:\n" + entry->partition.backward.to_text());
  }
  std::ostringstream os;
  os << s.options.partitioner << " partition: " << entry->partition.saved.size() << " saved values, "
     << entry->partition.saved_bytes << " bytes of activations, " << entry->partition.recomputed_nodes
     << " forward nodes recomputed in backward";
  log_line("partition", os.str());
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
  const std::string& backend = state_->options.backend;
  TG_CHECK(backend == "eager" || backend == "aot_eager" || backend == "cudagraphs", "[compile] unknown backend '",
           backend, "'; expected 'eager', 'aot_eager' or 'cudagraphs'");
  state_->partitioner = parse_partitioner(state_->options.partitioner);
  TG_CHECK(state_->options.cache_limit >= 1, "[compile] cache_limit must be at least 1, got ",
           state_->options.cache_limit);
}

TensorList CompiledFunction::call(const TensorList& args) {
  return call(CallArgs{args, input_display_names(args.size(), state_->options.input_names), {}});
}

TensorList CompiledFunction::call(const CallArgs& call) {
  State& s = *state_;
  const TensorList& args = call.tensors;
  if (s.options.backend == "eager") return s.fn(args);
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
  if (!entry) {
    if (static_cast<int>(s.entries.size()) >= s.options.cache_limit) {
      if (!s.warned_cache_limit) {
        std::cerr << "tapegraph warning: compiled function hit its cache limit (" << s.options.cache_limit
                  << " variants); further new input signatures run eagerly\n";
        s.warned_cache_limit = true;
      }
      record_fallback(s.counters, "cache_limit reached (" + std::to_string(s.options.cache_limit) + ")");
      return s.fn(args);
    }
    if (reason) {
      ++s.counters.recompiles;
      s.counters.recompile_reasons.push_back(*reason);
      ++global_counters().recompiles;
      global_counters().recompile_reasons.push_back(*reason);
      log_line("recompiles", "recompiling: " + *reason);
    }
    entry = build_entry(s, call);
    s.entries.push_back(entry);
  }
  if (entry->eager) return s.fn(args);
  ++s.counters.compiled_calls;
  ++global_counters().compiled_calls;
  TensorList outputs = run_entry(entry, args);
  set_grad_enabled(entry->joint.grad_enabled_after);
  return outputs;
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
