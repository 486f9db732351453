// One call through a compiled entry: the forward executor runs, the caller's tensors receive the
// function's writes (the epilogue), outputs that alias inputs become views of the caller's tensors
// again, and a CompiledBackward node, which runs the backward executor, becomes their grad_fn.
#include <algorithm>
#include <memory>
#include <vector>

#include "autograd/op_node.h"
#include "graphs/compiled_entry.h"
#include "graphs/runtime/compiled_backward.h"
#include "graphs/runtime/cudagraph_step.h"
#include "ops/elementwise/copy.h"
#include "ops/shape/view.h"
#include "tensor/grad_mode.h"

namespace tg::graphs {
namespace {

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

// Gives an output its own TensorImpl when it is a caller's tensor or repeats an earlier output,
// so attaching autograd state never touches the caller's tensor.
Tensor fresh_handle(const Tensor& t) {
  const TensorImpl& i = *t.impl();
  return Tensor(std::make_shared<TensorImpl>(i.storage(), i.sizes(), i.strides(), i.storage_offset(), i.dtype()));
}

}  // namespace

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

}  // namespace tg::graphs
