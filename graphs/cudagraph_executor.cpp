#include "graphs/cudagraph_executor.h"

#include <algorithm>
#include <map>
#include <set>
#include <sstream>

#include "autograd/grad_mode.h"
#include "graphs/cudagraph_step.h"
#include "graphs/logs.h"
#include "ops/copy.h"
#include "ops/dispatch.h"
#include "ops/factory.h"

namespace tg::graphs {

// One recording of a segment: its graph, the buffers it reads and the tensors it writes.
struct CudaGraphExecutor::Instance {
  std::unique_ptr<RecordedGraph> graph;
  TensorList input_buffers;                   // per segment input: the static tensor, or a copy buffer
  std::vector<const void*> static_addresses;  // per segment input: recorded address (nullptr: copied)
  TensorList outputs;                         // per segment output, as produced by the recording
  std::set<const StorageImpl*> owned;         // storages of outputs that belong to this instance
  std::vector<std::weak_ptr<StorageImpl>> handed_out;  // aliases given to callers at the last replay
  uint64_t step = 0;                          // step of the last replay
};

// Per captured segment: how often it ran and its recorded instances.
struct CudaGraphExecutor::SegmentState {
  int calls = 0;
  bool gave_up = false;
  std::vector<std::unique_ptr<Instance>> instances;
};

namespace {

const void* address_of(const Tensor& t) {
  return t.defined() && !t.impl()->storage()->is_fake() ? t.impl()->storage()->data() : nullptr;
}

std::string stale_message(const std::string& label) {
  return "[cudagraphs] this tensor is an output of a compiled " + label +
         " CUDA graph, and a later replay of that graph has overwritten its memory. Clone outputs you "
         "keep across calls (out.clone()), or call tg::mark_step_begin() at the start of each iteration "
         "and stop using the previous iteration's outputs.";
}

// A tensor over `t`'s memory with its own storage object, so that it can be invalidated alone.
Tensor alias_output(const Tensor& t, std::map<const StorageImpl*, std::shared_ptr<StorageImpl>>& made) {
  const Storage& s = t.impl()->storage();
  auto it = made.find(s.get());
  if (it == made.end()) {
    auto alias = std::make_shared<StorageImpl>(s->device(), s->data(), s->nbytes(), std::shared_ptr<void>(s));
    it = made.emplace(s.get(), std::move(alias)).first;
  }
  const TensorImpl& i = *t.impl();
  return Tensor(std::make_shared<TensorImpl>(it->second, i.sizes(), i.strides(), i.storage_offset(), i.dtype()));
}

}  // namespace

CudaGraphExecutor::CudaGraphExecutor(Graph graph, std::vector<bool> static_inputs,
                                     std::shared_ptr<GraphRecorder> recorder, CompileCounters* counters,
                                     std::string label, bool starts_step, int max_instances,
                                     DeviceType capture_on)
    : graph_(std::move(graph)),
      recorder_(std::move(recorder)),
      counters_(counters),
      label_(std::move(label)),
      starts_step_(starts_step),
      max_instances_(max_instances),
      plan_(plan_segments(graph_, capture_on)),
      interpreter_(graph_) {
  static_values_.assign(graph_.values.size(), false);
  for (size_t i = 0; i < graph_.inputs.size(); ++i)
    if (i < static_inputs.size() && static_inputs[i]) static_values_[static_cast<size_t>(graph_.inputs[i].value)] = true;
  for (const auto& [id, t] : graph_.constants) static_values_[static_cast<size_t>(id)] = true;
  for (const Segment& seg : plan_.segments)
    if (seg.captured)
      for (ValueId v : seg.outputs) static_values_[static_cast<size_t>(v)] = true;

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

  for (size_t s = 0; s < plan_.segments.size(); ++s) states_.push_back(std::make_unique<SegmentState>());
  count(&CompileCounters::captured_nodes, plan_.captured_nodes);
  count(&CompileCounters::eager_nodes, plan_.eager_nodes);
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

void CudaGraphExecutor::count(int CompileCounters::*field, int n) {
  if (counters_) counters_->*field += n;
  global_counters().*field += n;
}

void CudaGraphExecutor::count_skip(const std::string& reason, int n) {
  if (counters_) counters_->cudagraph_skips[reason] += n;
  global_counters().cudagraph_skips[reason] += n;
}

bool CudaGraphExecutor::is_static(ValueId v) const { return static_values_[static_cast<size_t>(v)]; }

TensorList CudaGraphExecutor::run(const TensorList& inputs) {
  TG_CHECK(inputs.size() == graph_.inputs.size(), "[cudagraphs] graph expects ", graph_.inputs.size(),
           " inputs, got ", inputs.size());
  if (starts_step_) begin_forward_call();
  NoGradGuard no_grad;
  std::vector<Tensor> env(graph_.values.size());
  for (const auto& [id, t] : graph_.constants) env[static_cast<size_t>(id)] = t;
  for (size_t i = 0; i < inputs.size(); ++i) env[static_cast<size_t>(graph_.inputs[i].value)] = inputs[i];
  for (size_t s = 0; s < plan_.segments.size(); ++s) {
    const Segment& seg = plan_.segments[s];
    if (seg.captured) {
      run_captured(s, env);
    } else {
      interpreter_.run_nodes(env, static_cast<size_t>(seg.nodes.front()), static_cast<size_t>(seg.nodes.back()) + 1);
    }
    for (ValueId v : release_after_segment_[s]) env[static_cast<size_t>(v)] = Tensor();
  }
  TensorList result;
  result.reserve(graph_.outputs.size());
  for (ValueId v : graph_.outputs) result.push_back(v >= 0 ? env[static_cast<size_t>(v)] : Tensor());
  return result;
}

void CudaGraphExecutor::run_captured(size_t s, std::vector<Tensor>& env) {
  const Segment& seg = plan_.segments[s];
  SegmentState& state = *states_[s];
  const size_t first = static_cast<size_t>(seg.nodes.front());
  const size_t last = static_cast<size_t>(seg.nodes.back()) + 1;
  if (++state.calls == 1 || state.gave_up) {
    // Warm-up (lazy initialisation such as library handles happens outside any capture).
    if (state.calls == 1) count(&CompileCounters::warmups);
    interpreter_.run_nodes(env, first, last);
    return;
  }
  Instance* inst = find_instance(state, seg, env);
  if (!inst) {
    if (static_cast<int>(state.instances.size()) >= max_instances_) {
      state.gave_up = true;
      const std::string reason = "static input addresses changed or live outputs, " +
                                 std::to_string(max_instances_) + " recordings (re-record limit)";
      count_skip(reason, static_cast<int>(seg.nodes.size()));
      log_line("cudagraphs", label_ + " graph: segment " + std::to_string(s) + " runs eagerly from now on: " + reason);
      interpreter_.run_nodes(env, first, last);
      return;
    }
    if (!state.instances.empty()) count(&CompileCounters::rerecords);
    inst = record(state, seg, env);
  }
  replay(*inst, seg, env);
}

CudaGraphExecutor::Instance* CudaGraphExecutor::find_instance(SegmentState& state, const Segment& seg,
                                                              const std::vector<Tensor>& env) {
  const uint64_t step = current_step();
  for (auto& inst : state.instances) {
    bool match = true;
    for (size_t i = 0; i < seg.inputs.size() && match; ++i) {
      const Tensor& t = env[static_cast<size_t>(seg.inputs[i])];
      if (inst->static_addresses[i]) match = address_of(t) == inst->static_addresses[i];
    }
    if (!match) continue;
    // Outputs of this step that someone still holds must not be overwritten.
    bool live = false;
    if (inst->step == step)
      for (const auto& w : inst->handed_out) live |= !w.expired();
    if (!live) return inst.get();
  }
  return nullptr;
}

CudaGraphExecutor::Instance* CudaGraphExecutor::record(SegmentState& state, const Segment& seg,
                                                       const std::vector<Tensor>& env) {
  auto inst = std::make_unique<Instance>();
  for (ValueId v : seg.inputs) {
    const Tensor& t = env[static_cast<size_t>(v)];
    if (is_static(v) || !t.defined()) {
      inst->input_buffers.push_back(t);
      inst->static_addresses.push_back(address_of(t));
    } else {
      Tensor buffer = empty_strided(t.sizes(), t.strides(), {.dtype = t.dtype(), .device = t.device()});
      buffer.copy_(t);
      inst->input_buffers.push_back(buffer);
      inst->static_addresses.push_back(nullptr);
    }
  }
  const Graph& g = graph_;
  const TensorList buffers = inst->input_buffers;
  auto body = [&g, &seg, buffers]() {
    std::map<ValueId, Tensor> local;
    for (size_t i = 0; i < seg.inputs.size(); ++i) local[seg.inputs[i]] = buffers[i];
    TensorList args;
    for (int32_t n : seg.nodes) {
      const GraphNode& node = g.nodes[static_cast<size_t>(n)];
      args.clear();
      for (ValueId v : node.inputs) args.push_back(v >= 0 ? local.at(v) : Tensor());
      TensorList outs = run_kernel(*node.op, args);
      for (size_t k = 0; k < node.outputs.size(); ++k) local[node.outputs[k]] = std::move(outs[k]);
    }
    TensorList outputs;
    for (ValueId v : seg.outputs) outputs.push_back(local.at(v));
    return outputs;
  };
  auto [graph, outputs] = recorder_->record(body);
  inst->graph = std::move(graph);
  inst->outputs = std::move(outputs);
  std::set<const StorageImpl*> static_storages;
  for (size_t i = 0; i < seg.inputs.size(); ++i)
    if (inst->static_addresses[i] && inst->input_buffers[i].defined())
      static_storages.insert(inst->input_buffers[i].impl()->storage().get());
  for (const Tensor& t : inst->outputs)
    if (t.defined() && !static_storages.count(t.impl()->storage().get())) inst->owned.insert(t.impl()->storage().get());
  count(&CompileCounters::graphs_captured);
  log_line("cudagraphs", label_ + " graph: recorded a CUDA graph of " + std::to_string(seg.nodes.size()) +
                             " node(s) (instance " + std::to_string(state.instances.size() + 1) + ")");
  state.instances.push_back(std::move(inst));
  return state.instances.back().get();
}

void CudaGraphExecutor::replay(Instance& inst, const Segment& seg, std::vector<Tensor>& env) {
  for (size_t i = 0; i < seg.inputs.size(); ++i) {
    if (inst.static_addresses[i]) continue;
    const Tensor& t = env[static_cast<size_t>(seg.inputs[i])];
    if (t.defined() && !t.is_same(inst.input_buffers[i])) inst.input_buffers[i].copy_(t);
  }
  // Whatever callers still hold from an earlier step is about to be overwritten.
  for (const auto& w : inst.handed_out)
    if (auto alive = w.lock()) alive->invalidate(stale_message(label_));
  inst.handed_out.clear();
  inst.graph->replay();
  count(&CompileCounters::replays);
  inst.step = current_step();
  std::map<const StorageImpl*, std::shared_ptr<StorageImpl>> made;
  for (size_t j = 0; j < seg.outputs.size(); ++j) {
    const Tensor& t = inst.outputs[j];
    if (!t.defined() || !inst.owned.count(t.impl()->storage().get())) {
      env[static_cast<size_t>(seg.outputs[j])] = t;
      continue;
    }
    env[static_cast<size_t>(seg.outputs[j])] = alias_output(t, made);
  }
  for (const auto& [storage, alias] : made) inst.handed_out.push_back(alias);
}

}  // namespace tg::graphs
