// See Note [CUDA graph executor] in docs/cudagraph_executor.md.
#include "graphs/cudagraphs/cudagraph_executor.h"

#include <algorithm>
#include <map>
#include <set>
#include <sstream>

#include "graphs/cudagraphs/branch_streams.h"
#include "graphs/logs.h"
#include "graphs/runtime/cudagraph_step.h"
#include "ops/core/dispatch.h"
#include "ops/elementwise/copy.h"
#include "ops/factory/factory.h"
#include "tensor/captured_work.h"
#include "tensor/grad_mode.h"

namespace tg::graphs {

// Where one segment output of an instance lives: in one of the instance's output buffers, in a
// tensor the instance does not own (a static input passed through), or nowhere (an output of no
// bytes, made afresh at each replay).
struct CudaGraphExecutor::OutputSlot {
  int buffer = -1;     // index into Instance::buffers, or -1
  Tensor passthrough;  // the tensor itself when buffer is -1 and the output has memory
  bool no_memory = false;
  Shape sizes, strides;
  int64_t offset = 0;
  DType dtype = kFloat32;
  Device device;
};

// One recording of a segment: its graph, the buffers it reads and the memory it writes.
struct CudaGraphExecutor::Instance {
  std::unique_ptr<RecordedGraph> graph;
  TensorList input_buffers;                   // per segment input: the static tensor, or a copy buffer
  std::vector<const void*> static_addresses;  // per segment input: recorded address (nullptr: copied)
  std::vector<OutputSlot> outputs;            // per segment output
  std::vector<std::shared_ptr<OutputBuffer>> buffers;  // the memory of the outputs
  std::vector<std::shared_ptr<void>> recorded_memory;  // the recording's own output storages, until the first replay
  std::vector<MemoryRange> scratch;           // pool memory the replay writes besides its buffers
  CapturedWork watched;                       // work that sees each replay (collectives, for their watchdog)
};

// Per captured segment: how often it ran and its recorded instances.
struct CudaGraphExecutor::SegmentState {
  int calls = 0;
  bool gave_up = false;
  std::vector<std::unique_ptr<Instance>> instances;
};

namespace {

// Where a static input's first element is (views of one buffer at other offsets are other addresses).
const void* address_of(const Tensor& t) {
  return t.defined() && !t.impl()->storage()->is_fake() ? t.impl()->data() : nullptr;
}

}  // namespace

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
    if (i < static_inputs.size() && static_inputs[i]) static_values_[static_cast<size_t>(graph_.inputs[i].value)] = true;
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
    count(&CompileCounters::branch_nodes, static_cast<int>(std::count(seg.on_branch.begin(), seg.on_branch.end(), true)));
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
      for (int32_t n : seg.nodes) transfers += is_host_transfer(graph_, graph_.nodes[static_cast<size_t>(n)], capture_on_);
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

void CudaGraphExecutor::run_captured(size_t s, std::vector<Tensor>& env) {
  const Segment& seg = plan_.segments[s];
  SegmentState& state = *states_[s];
  const int nodes = static_cast<int>(seg.nodes.size());
  if (++state.calls == 1 || state.gave_up) {
    if (state.calls == 1) {
      // Warm-up, inside the pool (lazy initialisation such as library handles happens outside any capture).
      count(&CompileCounters::warmups);
      report_.warmup_nodes += nodes;
      recorder_->warm_up([&] { run_eagerly(seg, env); });
    } else {
      // Never with strict capture: it raises instead of giving up.
      report_.past_limit_nodes += nodes;
      run_eagerly(seg, env);
    }
    return;
  }
  std::optional<std::vector<std::shared_ptr<void>>> memory;
  BufferList overwritten;
  const std::vector<bool> consumed = consumed_inputs(s, env);
  std::set<const StorageImpl*> consumed_storages;
  for (size_t i = 0; i < seg.inputs.size(); ++i)
    if (consumed[i]) consumed_storages.insert(env[static_cast<size_t>(seg.inputs[i])].impl()->storage().get());
  Instance* inst = find_instance(state, seg, env, consumed_storages, overwritten);
  if (!inst) inst = update_instance(state, s, env, consumed_storages, overwritten);
  if (inst) {
    // Inputs are copied in before the replay's memory is taken: an input may be an earlier step's
    // output that this replay overwrites.
    for (size_t i = 0; i < seg.inputs.size(); ++i) {
      if (inst->static_addresses[i]) continue;
      const Tensor& t = env[static_cast<size_t>(seg.inputs[i])];
      if (t.defined() && !t.is_same(inst->input_buffers[i])) {
        inst->input_buffers[i].copy_(t);
        count(&CompileCounters::input_copies);
      }
    }
    std::vector<const void*> consumed_blocks;
    for (const StorageImpl* st : consumed_storages) consumed_blocks.push_back(st->data());
    memory = take_memory(*inst, overwritten, consumed_blocks);
    if (!memory)
      log_line("cudagraphs", label_ + " graph: segment " + std::to_string(s) +
                                 ": a tensor outside the graphs' outputs holds memory this replay writes");
  }
  if (!memory) {
    // Strict capture raises before anything is recorded again or run eagerly.
    if (checks_.strict && !state.instances.empty())
      strict_capture_failure(where(), "segment " + std::to_string(s) + " would be recorded again: " +
                                          rerecord_reason(s, env, inst != nullptr));
    if (static_cast<int>(state.instances.size()) >= max_instances_) {
      if (checks_.strict)
        strict_capture_failure(where(), "segment " + std::to_string(s) + " (from node " + std::to_string(seg.nodes.front()) +
                                            ") would run eagerly: cudagraph_max_recordings is " + std::to_string(max_instances_));
      state.gave_up = true;
      report_.past_limit_nodes += nodes;
      const std::string reason = "static input addresses changed or live outputs, " +
                                 std::to_string(max_instances_) + " recordings (re-record limit)";
      count_skip(reason, static_cast<int>(seg.nodes.size()));
      log_line("cudagraphs", label_ + " graph: segment " + std::to_string(s) + " runs eagerly from now on: " + reason);
      run_eagerly(seg, env);
      return;
    }
    if (!state.instances.empty()) count(&CompileCounters::rerecords);
    inst = record(state, seg, env, consumed);
    ++report_.recorded;
    // A fresh recording overlaps no live buffer: its capture allocated around them.
    memory = take_memory(*inst, {});
    TG_CHECK(memory.has_value(), "[cudagraphs] internal error: a fresh recording's memory is in use");
  }
  replay(*inst, *memory, seg, env);
}

CudaGraphExecutor::Instance* CudaGraphExecutor::find_instance(SegmentState& state, const Segment& seg,
                                                              const std::vector<Tensor>& env,
                                                              const std::set<const StorageImpl*>& consumed,
                                                              BufferList& overwritten) {
  for (auto& inst : state.instances) {
    bool match = true;
    for (size_t i = 0; i < seg.inputs.size() && match; ++i) {
      const Tensor& t = env[static_cast<size_t>(seg.inputs[i])];
      if (inst->static_addresses[i]) match = address_of(t) == inst->static_addresses[i];
    }
    if (!match) continue;
    if (auto victims = overwritable(*inst, consumed)) {
      overwritten = std::move(*victims);
      return inst.get();
    }
  }
  return nullptr;
}

CudaGraphExecutor::Instance* CudaGraphExecutor::update_instance(SegmentState& state, size_t s,
                                                                const std::vector<Tensor>& env,
                                                                const std::set<const StorageImpl*>& consumed,
                                                                BufferList& overwritten) {
  const Segment& seg = plan_.segments[s];
  // The most recent recording first: it is the likeliest to match the rest of the call.
  for (auto it = state.instances.rbegin(); it != state.instances.rend(); ++it) {
    Instance& inst = **it;
    std::vector<AddressMove> moves;
    std::vector<size_t> moved;
    bool possible = true;
    for (size_t i = 0; i < seg.inputs.size() && possible; ++i) {
      if (!inst.static_addresses[i]) continue;  // copied into the instance's own buffer
      const Tensor& now = env[static_cast<size_t>(seg.inputs[i])];
      if (address_of(now) == inst.static_addresses[i]) continue;
      const Tensor& old = inst.input_buffers[i];
      // Whole storages move, at the same offset (a parameter moved in place keeps its handle, whose
      // storage is then the new one: the recorded address gives the old place). A consumed input's
      // memory may have been reused inside the recording, so its old addresses are not the input's
      // alone: no update then.
      possible = old.defined() && address_of(now) != nullptr && !consumed.count(now.impl()->storage().get()) &&
                 (old.is_same(now) || (old.storage_offset() == now.storage_offset() &&
                                       old.impl()->storage()->nbytes() == now.impl()->storage()->nbytes()));
      if (!possible) break;
      const auto nbytes = static_cast<size_t>(now.impl()->storage()->nbytes());
      const auto* old_base = static_cast<const char*>(inst.static_addresses[i]) - now.storage_offset() * now.element_size();
      const MemoryRange from = MemoryRange::of(old_base, nbytes);
      // An output passed through from the old storage would still hand out a tensor there.
      for (const OutputSlot& slot : inst.outputs) {
        const auto at = reinterpret_cast<uintptr_t>(address_of(slot.passthrough));
        if (slot.buffer < 0 && at >= from.begin && at < from.end) possible = false;
      }
      if (!possible) break;
      moves.push_back({from, reinterpret_cast<uintptr_t>(now.impl()->storage()->data())});
      moved.push_back(i);
    }
    if (!possible || moves.empty()) continue;
    auto victims = overwritable(inst, consumed);
    if (!victims) continue;
    std::string why;
    if (!inst.graph->retarget(moves, why)) {
      log_line("cudagraphs", label_ + " graph: segment " + std::to_string(s) +
                                 ": static inputs moved, recording again: " + why);
      return nullptr;
    }
    for (size_t i : moved) {
      inst.input_buffers[i] = env[static_cast<size_t>(seg.inputs[i])];
      inst.static_addresses[i] = address_of(inst.input_buffers[i]);
    }
    count(&CompileCounters::graph_updates);
    if (log_enabled("cudagraphs")) {
      std::string names;
      for (size_t k = 0; k < moved.size() && k < 4; ++k) {
        const Tensor& t = env[static_cast<size_t>(seg.inputs[moved[k]])];
        std::ostringstream one;
        one << (k ? ", %" : " (%") << graph_.values[static_cast<size_t>(seg.inputs[moved[k]])].name << " "
            << dtype_name(t.dtype()) << shape_str(t.sizes()) << " from " << reinterpret_cast<const void*>(moves[k].from.begin) << " to "
            << address_of(t);
        names += one.str();
      }
      if (!names.empty()) names += moved.size() > 4 ? ", ...)" : ")";
      log_line("cudagraphs", label_ + " graph: segment " + std::to_string(s) + ": updated the recorded graph for " +
                                 std::to_string(moves.size()) + " moved static input(s)" + names);
    }
    overwritten = std::move(*victims);
    return &inst;
  }
  return nullptr;
}

std::string CudaGraphExecutor::rerecord_reason(size_t s, const std::vector<Tensor>& env, bool memory_in_use) const {
  if (memory_in_use) return "a tensor outside the graphs' outputs holds memory its replay writes";
  const Segment& seg = plan_.segments[s];
  std::string moved;
  for (const auto& inst : states_[s]->instances) {
    size_t i = 0;
    while (i < seg.inputs.size() && (!inst->static_addresses[i] ||
                                     address_of(env[static_cast<size_t>(seg.inputs[i])]) == inst->static_addresses[i]))
      ++i;
    if (i == seg.inputs.size())
      return "its replay would overwrite outputs of the current step that are still alive (a second call in one "
             "step; tg::mark_step_begin() starts a new step)";
    if (!moved.empty()) continue;
    const ValueId v = seg.inputs[i];
    int32_t reader = seg.nodes.front();
    for (int32_t n : seg.nodes) {
      const auto& ins = graph_.nodes[static_cast<size_t>(n)].inputs;
      if (std::find(ins.begin(), ins.end(), v) != ins.end()) {
        reader = n;
        break;
      }
    }
    std::ostringstream os;
    os << "static input address changed: %" << graph_.values[static_cast<size_t>(v)].name << " (read by node " << reader
       << ", " << graph_.nodes[static_cast<size_t>(reader)].op->name() << ") was recorded at "
       << inst->static_addresses[i] << ", now at " << address_of(env[static_cast<size_t>(v)]);
    moved = os.str();
  }
  return moved;
}

std::optional<CudaGraphExecutor::BufferList> CudaGraphExecutor::overwritable(
    const Instance& inst, const std::set<const StorageImpl*>& consumed) const {
  const uint64_t step = current_step();
  for (const auto& b : inst.buffers)
    if (b->needed_in(step)) return std::nullopt;
  BufferList others = OutputBufferIndex::global().overlapping(inst.graph->written(), inst.buffers);
  for (const auto& b : others)
    if (b->needed_in(step) && !b->held_only_by(consumed)) return std::nullopt;
  return others;
}

std::vector<bool> CudaGraphExecutor::consumed_inputs(size_t s, const std::vector<Tensor>& env) const {
  const Segment& seg = plan_.segments[s];
  std::vector<bool> consumed(seg.inputs.size(), false);
  if (!recorder_->replays_by_address()) return consumed;
  for (size_t i = 0; i < seg.inputs.size(); ++i) {
    const Tensor& t = env[static_cast<size_t>(seg.inputs[i])];
    if (!consumable_[s][i] || !t.defined()) continue;
    // An empty tensor has no memory to give back (and no address to replay by).
    if (t.numel() == 0 || t.impl()->storage()->is_fake() || t.impl()->view_base()) continue;
    // Held by this run alone: one handle, over a storage no other tensor shares.
    consumed[i] = t.impl_ptr().use_count() == 1 && t.impl()->storage().use_count() == 1;
  }
  // Two inputs over one tensor are not consumed by either.
  for (size_t i = 0; i < seg.inputs.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (consumed[i] && consumed[j] && env[static_cast<size_t>(seg.inputs[i])].is_same(env[static_cast<size_t>(seg.inputs[j])]))
        consumed[i] = consumed[j] = false;
  return consumed;
}

std::optional<std::vector<std::shared_ptr<void>>> CudaGraphExecutor::take_memory(
    Instance& inst, const BufferList& overwritten, const std::vector<const void*>& consumed) {
  for (const auto& b : overwritten) b->invalidate();
  std::vector<std::shared_ptr<void>> memory(inst.buffers.size());
  for (size_t k = 0; k < inst.buffers.size(); ++k) {
    OutputBuffer& b = *inst.buffers[k];
    memory[k] = k < inst.recorded_memory.size() ? inst.recorded_memory[k] : b.owner.lock();
    b.invalidate();
    if (!memory[k]) memory[k] = recorder_->reclaim(b.range);
    if (!memory[k]) return std::nullopt;
  }
  inst.recorded_memory.clear();
  std::vector<const void*> own = consumed;
  for (const auto& b : inst.buffers) own.push_back(reinterpret_cast<const void*>(b->range.begin));
  if (recorder_->in_use(inst.scratch, own)) return std::nullopt;
  return memory;
}

CudaGraphExecutor::Instance* CudaGraphExecutor::record(SegmentState& state, const Segment& seg,
                                                       std::vector<Tensor>& env, const std::vector<bool>& consumed) {
  auto inst = std::make_unique<Instance>();
  // Consumed inputs go to the recording alone, which drops each after its last reader, so the rest of
  // the capture reuses their memory (as an eager run frees a saved activation once used).
  auto handed = std::make_shared<std::map<ValueId, Tensor>>();
  for (size_t i = 0; i < seg.inputs.size(); ++i)
    if (consumed[i]) (*handed)[seg.inputs[i]] = std::move(env[static_cast<size_t>(seg.inputs[i])]);
  for (size_t i = 0; i < seg.inputs.size(); ++i) {
    const ValueId v = seg.inputs[i];
    if (consumed[i]) {
      inst->input_buffers.push_back(Tensor());
      inst->static_addresses.push_back(address_of(handed->at(v)));
      continue;
    }
    const Tensor& t = env[static_cast<size_t>(v)];
    // Static: graph inputs declared so, and tensors over memory marked as keeping its address.
    if (is_static(v) || !t.defined() || is_static_address(t)) {
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
  const Interpreter& interp = interpreter_;
  GraphRecorder& recorder = *recorder_;
  auto body = [&g, &seg, &interp, &recorder, buffers, handed]() {
    std::map<ValueId, Tensor> local = std::move(*handed);  // the recorder runs the body once
    for (size_t i = 0; i < seg.inputs.size(); ++i)
      if (buffers[i].defined() || !local.count(seg.inputs[i])) local[seg.inputs[i]] = buffers[i];
    TensorList args;
    PendingBranches branches;
    for (size_t p = 0; p < seg.nodes.size(); ++p) {
      const int32_t n = seg.nodes[p];
      const GraphNode& node = g.nodes[static_cast<size_t>(n)];
      args.clear();
      for (ValueId v : node.inputs) args.push_back(v >= 0 ? local.at(v) : Tensor());
      TensorList outs;
      if (!seg.on_branch.empty() && seg.on_branch[p]) {
        outs = recorder.record_on_branch([&] { return run_kernel(*node.op, args); }, args);
        branches.add(args, outs);
      } else {
        if (!branches.empty() && branches.conflicts(*node.op, args)) {
          recorder.join_branches();
          branches.clear();
        }
        outs = run_kernel(*node.op, args);
      }
      args.clear();
      for (size_t k = 0; k < node.outputs.size(); ++k) local[node.outputs[k]] = std::move(outs[k]);
      // Dropped at its last reader, a value's block is free for the rest of the capture to reuse
      // (stream order keeps that safe on replay too), as eager execution would reuse it.
      for (ValueId v : interp.released_after(static_cast<size_t>(n))) local.erase(v);
    }
    TensorList outputs;
    for (ValueId v : seg.outputs) outputs.push_back(local.at(v));
    return outputs;
  };
  if (std::find(seg.on_branch.begin(), seg.on_branch.end(), true) != seg.on_branch.end()) recorder_->prepare_branches();
  CapturedWorkScope noted;  // communicators note the collectives the recording holds
  auto [graph, outputs] = recorder_->record(body);
  inst->graph = std::move(graph);
  inst->watched = noted.take();

  // Outputs over a static input's memory are passed through; the others get output buffers.
  std::set<const StorageImpl*> static_storages;
  for (size_t i = 0; i < seg.inputs.size(); ++i)
    if (inst->static_addresses[i] && inst->input_buffers[i].defined())
      static_storages.insert(inst->input_buffers[i].impl()->storage().get());
  std::map<const StorageImpl*, int> buffer_of;
  std::vector<MemoryRange> buffer_ranges;
  for (const Tensor& t : outputs) {
    OutputSlot slot;
    if (!t.defined() || static_storages.count(t.impl()->storage().get())) {
      slot.passthrough = t;
      inst->outputs.push_back(std::move(slot));
      continue;
    }
    const Storage& storage = t.impl()->storage();
    if (storage->nbytes() == 0) {
      // Nothing to claim or overwrite (an empty saved tensor, such as the random state of attention
      // without dropout): the replay hands out a new empty tensor.
      slot.no_memory = true;
      slot.sizes = t.sizes();
      slot.strides = t.strides();
      slot.dtype = t.dtype();
      slot.device = t.device();
      inst->outputs.push_back(std::move(slot));
      continue;
    }
    auto [it, fresh] = buffer_of.emplace(storage.get(), static_cast<int>(inst->buffers.size()));
    if (fresh) {
      auto buffer = std::make_shared<OutputBuffer>();
      buffer->range = MemoryRange::of(storage->data(), static_cast<size_t>(storage->nbytes()));
      buffer->device = storage->device();
      buffer->label = label_;
      buffer->owner = storage;
      OutputBufferIndex::global().add(buffer);
      buffer_ranges.push_back(buffer->range);
      inst->buffers.push_back(std::move(buffer));
      inst->recorded_memory.push_back(storage);
    }
    slot.buffer = it->second;
    slot.sizes = t.sizes();
    slot.strides = t.strides();
    slot.offset = t.impl()->storage_offset();
    slot.dtype = t.dtype();
    inst->outputs.push_back(std::move(slot));
  }
  inst->scratch = subtract_ranges(inst->graph->written(), std::move(buffer_ranges));
  count(&CompileCounters::graphs_captured);
  log_line("cudagraphs", label_ + " graph: recorded a CUDA graph of " + std::to_string(seg.nodes.size()) +
                             " node(s) (instance " + std::to_string(state.instances.size() + 1) + ")");
  state.instances.push_back(std::move(inst));
  return state.instances.back().get();
}

void CudaGraphExecutor::replay(Instance& inst, const std::vector<std::shared_ptr<void>>& memory, const Segment& seg,
                               std::vector<Tensor>& env) {
  inst.graph->replay();
  if (!inst.watched.empty()) inst.watched.replayed(where());  // an event and a queue entry per watcher
  count(&CompileCounters::replays);
  count(&CompileCounters::replayed_kernels, inst.graph->kernels());
  ++report_.replays;
  report_.kernels += inst.graph->kernels();
  report_.replayed_nodes += static_cast<int>(seg.nodes.size());
  const uint64_t step = current_step();
  std::vector<Storage> storages(inst.buffers.size());
  for (size_t k = 0; k < inst.buffers.size(); ++k) {
    inst.buffers[k]->step = step;
    storages[k] = inst.buffers[k]->hand_out(memory[k]);
  }
  for (size_t j = 0; j < seg.outputs.size(); ++j) {
    const OutputSlot& slot = inst.outputs[j];
    Tensor& out = env[static_cast<size_t>(seg.outputs[j])];
    if (slot.no_memory) {
      out = empty_strided(slot.sizes, slot.strides, {.dtype = slot.dtype, .device = slot.device});
    } else if (slot.buffer < 0) {
      out = slot.passthrough;
    } else {
      out = Tensor(std::make_shared<TensorImpl>(storages[static_cast<size_t>(slot.buffer)], slot.sizes, slot.strides,
                                                slot.offset, slot.dtype));
    }
  }
}

}  // namespace tg::graphs
