// What a captured segment does on a call: warm up on its first, then replay a recording whose
// static inputs and memory fit the call, update one whose static inputs moved, record another, or,
// past cudagraph_max_recordings, run eagerly from then on. See Note [CUDA graph executor] in
// docs/cudagraph_executor.md.
#include <algorithm>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "graphs/cudagraphs/cudagraph_executor.h"
#include "graphs/cudagraphs/segment_instance.h"
#include "graphs/logs.h"
#include "graphs/runtime/cudagraph_step.h"

namespace tg::graphs {

void CudaGraphExecutor::run_captured(size_t s, std::vector<Tensor>& env) {
  const Segment& seg = plan_.segments[s];
  SegmentState& state = *states_[s];
  const int nodes = static_cast<int>(seg.nodes.size());
  if (++state.calls == 1 || state.gave_up) {
    if (state.calls == 1) {
      // Warm-up, eagerly and outside the graphs' pool (lazy set-up such as library handles happens
      // outside any capture).
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
    copy_inputs(*inst, seg, env);
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
        strict_capture_failure(where(), "segment " + std::to_string(s) + " (from node " +
                                            std::to_string(seg.nodes.front()) +
                                            ") would run eagerly: cudagraph_max_recordings is " +
                                            std::to_string(max_instances_));
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

}  // namespace tg::graphs
