// A graph update instead of a new recording: when a segment's static inputs moved (whole storages,
// same offsets), a recorded instance is rewritten in place to read them where they are now
// (RecordedGraph::retarget). See Note [CUDA graph executor] in docs/cudagraph_executor.md.
#include <sstream>
#include <string>
#include <vector>

#include "graphs/cudagraphs/cudagraph_executor.h"
#include "graphs/cudagraphs/memory_range.h"
#include "graphs/cudagraphs/segment_instance.h"
#include "graphs/logs.h"

namespace tg::graphs {

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
      const auto* old_base =
          static_cast<const char*>(inst.static_addresses[i]) - now.storage_offset() * now.element_size();
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
            << dtype_name(t.dtype()) << shape_str(t.sizes()) << " from "
            << reinterpret_cast<const void*>(moves[k].from.begin) << " to " << address_of(t);
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

}  // namespace tg::graphs
