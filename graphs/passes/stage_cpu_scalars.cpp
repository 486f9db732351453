// See Note [CUDA graph executor] in docs/cudagraph_executor.md.
#include "graphs/passes/stage_cpu_scalars.h"

#include <map>

#include "ops/elementwise/copy.h"

namespace tg::graphs {

const OpSchema& StageToDeviceOp::schema() const {
  static const OpSchema s{"stage_to_device", kDeviceCopy, -1, -1};
  return s;
}

std::vector<TensorMeta> StageToDeviceOp::infer(const TensorList& inputs) const {
  return single_output(contiguous_meta(inputs[0].sizes(), inputs[0].dtype(), device_));
}

void StageToDeviceOp::eval(const TensorList& inputs, TensorList& outputs) const { outputs[0].copy_(inputs[0]); }

namespace {

bool is_cpu_scalar(const Value& v) { return v.meta.device.is_cpu() && v.meta.sizes.empty(); }

// The CUDA device a node computes on, if any.
std::optional<Device> cuda_device_of(const Graph& g, const GraphNode& n) {
  for (ValueId v : n.outputs)
    if (g.values[static_cast<size_t>(v)].meta.device.is_cuda()) return g.values[static_cast<size_t>(v)].meta.device;
  return std::nullopt;
}

}  // namespace

Graph stage_cpu_scalars(const Graph& graph) {
  Graph out;
  out.values = graph.values;
  out.inputs = graph.inputs;
  out.outputs = graph.outputs;
  out.constants = graph.constants;
  std::map<std::pair<ValueId, int>, ValueId> staged;  // (CPU value, device index) -> device copy
  for (const GraphNode& n : graph.nodes) {
    GraphNode copy = n;
    if (auto device = cuda_device_of(graph, n)) {
      for (ValueId& in : copy.inputs) {
        if (in < 0 || !is_cpu_scalar(graph.values[static_cast<size_t>(in)])) continue;
        const auto key = std::make_pair(in, static_cast<int>(device->index));
        auto it = staged.find(key);
        if (it == staged.end()) {
          TensorMeta m = graph.values[static_cast<size_t>(in)].meta;
          m.device = *device;
          const ValueId v = out.add_value(m, graph.values[static_cast<size_t>(in)].name + "_staged");
          out.add_node(std::make_shared<const StageToDeviceOp>(*device), {in}, {v}, n.phase, n.sequence_nr);
          it = staged.emplace(key, v).first;
        }
        in = it->second;
      }
    }
    const auto index = static_cast<int32_t>(out.nodes.size());
    for (size_t k = 0; k < copy.outputs.size(); ++k) {
      out.values[static_cast<size_t>(copy.outputs[k])].producer = index;
      out.values[static_cast<size_t>(copy.outputs[k])].output_index = static_cast<int32_t>(k);
    }
    out.nodes.push_back(std::move(copy));
  }
  return out;
}

}  // namespace tg::graphs
