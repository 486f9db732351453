// Recording a segment: which inputs the recording may consume (free after their last reader), the
// capture itself, and the output buffers of the new instance. See Note [CUDA graph executor] in
// docs/cudagraph_executor.md.
#include <algorithm>
#include <map>
#include <set>
#include <vector>

#include "graphs/cudagraphs/branch_streams.h"
#include "graphs/cudagraphs/cudagraph_executor.h"
#include "graphs/cudagraphs/segment_instance.h"
#include "graphs/logs.h"
#include "graphs/runtime/cudagraph_step.h"
#include "ops/core/dispatch.h"
#include "ops/elementwise/copy.h"
#include "ops/factory/factory.h"
#include "tensor/captured_work.h"

namespace tg::graphs {

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
      if (consumed[i] && consumed[j] &&
          env[static_cast<size_t>(seg.inputs[i])].is_same(env[static_cast<size_t>(seg.inputs[j])]))
        consumed[i] = consumed[j] = false;
  return consumed;
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

}  // namespace tg::graphs
