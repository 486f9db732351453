// export_forward(): the forward graph of a function traced once without its joint, run op by op
// through the dispatcher on new inputs of the same signature.
#include "graphs/compile.h"

#include "ops/core/dispatch.h"
#include "ops/elementwise/copy.h"
#include "tensor/grad_mode.h"

namespace tg::graphs {

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
  for (const GraphInput& in : g.inputs)
    env[static_cast<size_t>(in.value)] = primal({in.kind, in.index}, inputs, joint_->lifted);
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

}  // namespace tg::graphs
