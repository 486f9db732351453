// Replaying an instance: the call's non-static inputs copied into its buffers, the memory its replay
// writes taken back (invalidating earlier outputs there), the replay, and its outputs handed out.
// See Note [CUDA graph executor] in docs/cudagraph_executor.md and Note [Stale outputs] in
// docs/stale_outputs.md.
#include <memory>
#include <optional>
#include <vector>

#include "graphs/cudagraphs/cudagraph_executor.h"
#include "graphs/cudagraphs/segment_instance.h"
#include "graphs/runtime/cudagraph_step.h"
#include "ops/core/profile_hooks.h"
#include "ops/elementwise/copy.h"
#include "ops/factory/factory.h"

namespace tg::graphs {

void CudaGraphExecutor::copy_inputs(Instance& inst, const Segment& seg, const std::vector<Tensor>& env) {
  for (size_t i = 0; i < seg.inputs.size(); ++i) {
    if (inst.static_addresses[i]) continue;
    const Tensor& t = env[static_cast<size_t>(seg.inputs[i])];
    if (t.defined() && !t.is_same(inst.input_buffers[i])) {
      inst.input_buffers[i].copy_(t);
      count(&CompileCounters::input_copies);
    }
  }
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

void CudaGraphExecutor::replay(Instance& inst, const std::vector<std::shared_ptr<void>>& memory, const Segment& seg,
                               std::vector<Tensor>& env) {
  {
    NamedRange range("cudagraph", [&] { return "cudagraph replay: " + where(); });
    inst.graph->replay();
  }
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
