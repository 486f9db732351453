// See Note [Compile pipeline] in docs/compile_pipeline.md.
#include "graphs/runtime/interpreter.h"

#include <set>

#include "graphs/capture/fake.h"
#include "ops/core/dispatch.h"
#include "ops/core/profile_hooks.h"
#include "tensor/cuda_runtime.h"
#include "tensor/grad_mode.h"
#include "tensor/memory/cpu_allocator.h"

namespace tg::graphs {

Interpreter::Interpreter(const Graph& graph) : graph_(graph), release_after_(graph.nodes.size()) {
  std::vector<int32_t> last_use(graph.values.size(), -1);
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    for (ValueId v : graph.nodes[i].outputs)  // a value nobody reads goes right after the node that made it
      if (v >= 0) last_use[static_cast<size_t>(v)] = static_cast<int32_t>(i);
    for (ValueId v : graph.nodes[i].inputs)
      if (v >= 0) last_use[static_cast<size_t>(v)] = static_cast<int32_t>(i);
  }
  std::set<ValueId> keep(graph.outputs.begin(), graph.outputs.end());
  for (const auto& [id, t] : graph.constants) keep.insert(id);
  for (size_t v = 0; v < last_use.size(); ++v)
    if (last_use[v] >= 0 && !keep.count(static_cast<ValueId>(v)))
      release_after_[static_cast<size_t>(last_use[v])].push_back(static_cast<ValueId>(v));
}

// Runs the graph once on data-less tensors with the inputs' traced metadata: the metadata every
// node's infer() gives then is what it gives on any call whose inputs have that metadata (infer()
// reads metadata only), so such calls may skip it.
void Interpreter::plan_nodes() {
  for (const GraphNode& n : graph_.nodes)
    if (n.op->has(kMetadataMutation)) return;  // its eval changes geometry: keep to the general path
  for (const auto& [id, t] : graph_.constants)
    if (t.defined() && t.impl()->storage()->is_fake()) return;  // kernels would be skipped, not planned
  for (const GraphInput& in : graph_.inputs) {
    const TensorMeta& m = graph_.values[static_cast<size_t>(in.value)].meta;
    if (m.strides.size() != m.sizes.size()) return;  // no layout recorded: nothing to plan from
  }
  std::vector<NodePlan> plans(graph_.nodes.size());
  try {
    NoGradGuard no_grad;
    std::vector<Tensor> env(graph_.values.size());
    for (const auto& [id, t] : graph_.constants) env[static_cast<size_t>(id)] = t;
    for (const GraphInput& in : graph_.inputs)
      env[static_cast<size_t>(in.value)] = fake_tensor(graph_.values[static_cast<size_t>(in.value)].meta);
    TensorList args;
    for (size_t i = 0; i < graph_.nodes.size(); ++i) {
      const GraphNode& n = graph_.nodes[i];
      args.clear();
      for (ValueId v : n.inputs) args.push_back(v >= 0 ? env[static_cast<size_t>(v)] : Tensor());
      TensorList outs = run_kernel(*n.op, args, /*fake=*/true);
      const OpSchema& s = n.op->schema();
      NodePlan& p = plans[i];
      p.direct = s.mutates < 0 && s.view_of < 0 && !n.op->has(kView);
      for (size_t k = 0; k < n.outputs.size(); ++k) {
        const Tensor& t = outs[k];
        p.launch = p.launch || t.numel() > 0;
        if (p.direct)
          p.outputs.push_back({t.sizes(), t.strides(), t.dtype(), t.device(),
                               storage_span(t.sizes(), t.strides()) * dtype_size(t.dtype())});
        env[static_cast<size_t>(n.outputs[k])] = std::move(outs[k]);
      }
    }
  } catch (const std::exception&) {
    return;  // an op that cannot run on data-less tensors: every call takes the general path
  }
  plans_ = std::move(plans);
}

// True when the inputs have the metadata the plan was made for (and hold data).
bool Interpreter::matches_plan(const TensorList& inputs) const {
  if (plans_.empty()) return false;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& t = inputs[i];
    const TensorMeta& m = graph_.values[static_cast<size_t>(graph_.inputs[i].value)].meta;
    if (!t.defined() || t.impl()->storage()->is_fake() || t.dtype() != m.dtype || t.device() != m.device ||
        t.sizes() != m.sizes || t.strides() != m.strides)
      return false;
  }
  return true;
}

TensorList Interpreter::run(TensorList inputs) {
  TG_CHECK(inputs.size() == graph_.inputs.size(), "[interpreter] graph expects ", graph_.inputs.size(),
           " inputs, got ", inputs.size());
  NoGradGuard no_grad;
  // Planned at the first run: executors that only call run_nodes (the CUDA graph executor's
  // segments) never pay for the data-less pass.
  if (!planning_tried_) {
    planning_tried_ = true;
    plan_nodes();
  }
  const bool planned = matches_plan(inputs);
  std::vector<Tensor> env(graph_.values.size());
  for (const auto& [id, t] : graph_.constants) env[static_cast<size_t>(id)] = t;
  for (size_t i = 0; i < inputs.size(); ++i) env[static_cast<size_t>(graph_.inputs[i].value)] = std::move(inputs[i]);
  run_range(env, 0, graph_.nodes.size(), planned);
  TensorList result;
  result.reserve(graph_.outputs.size());
  for (ValueId v : graph_.outputs) result.push_back(v >= 0 ? env[static_cast<size_t>(v)] : Tensor());
  return result;
}

void Interpreter::run_nodes(std::vector<Tensor>& env, size_t first, size_t last) const {
  run_range(env, first, last, /*planned=*/false);
}

void Interpreter::run_range(std::vector<Tensor>& env, size_t first, size_t last, bool planned) const {
  TensorList args, outs;
  for (size_t i = first; i < last; ++i) {
    const GraphNode& n = graph_.nodes[i];
    args.clear();
    for (ValueId v : n.inputs) args.push_back(v >= 0 ? env[static_cast<size_t>(v)] : Tensor());
    OpPtr redrawn;
    const Op& op = n.op->has(kRandom) ? *(redrawn = n.op->redraw()) : *n.op;
    if (planned && plans_[i].direct) {
      // What run_kernel does for fresh outputs, with their metadata known (and its profiler range).
      OpRange range(op, args);
      outs.clear();
      for (const PlannedOutput& o : plans_[i].outputs)
        outs.emplace_back(make_shared_small<TensorImpl>(make_shared_small<StorageImpl>(o.device, o.nbytes),
                                                        o.sizes, o.strides, 0, o.dtype));
      if (plans_[i].launch) op.eval(args, outs);
    } else {
      outs = run_kernel(op, args);
    }
    args.clear();
    for (size_t k = 0; k < n.outputs.size(); ++k) env[static_cast<size_t>(n.outputs[k])] = std::move(outs[k]);
    for (ValueId v : release_after_[i]) env[static_cast<size_t>(v)] = Tensor();
  }
  // Asynchronous collectives finish before anyone reads the results (and inside a capture, before
  // it ends: a captured fork must join).
  cuda::join_forked_work();
}

}  // namespace tg::graphs
