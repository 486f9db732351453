// The tape side of dispatch (ops/core/tape.h): OpNodes made, saved and linked to the op's outputs.
#include "autograd/engine.h"
#include "autograd/op_node.h"
#include "autograd/view_rebase.h"
#include "ops/core/tape.h"

namespace tg::tape {

std::shared_ptr<Node> begin_node(const OpPtr& op, const TensorList& inputs, const Tensor& pre_write) {
  auto node = make_shared_small<OpNode>(op, inputs);
  if (pre_write.defined()) {
    TensorList saved = inputs;
    saved[static_cast<size_t>(op->schema().mutates)] = pre_write;
    node->save_inputs(saved);
  } else {
    node->save_inputs(inputs);
  }
  return node;
}

void finish_node(const std::shared_ptr<Node>& base, const Op& op, const TensorList& outputs, bool traced) {
  const auto node = std::static_pointer_cast<OpNode>(base);
  if (traced && current_backward_sequence_nr() >= 0) node->mark_traced_double_backward();
  for (const Tensor& out : outputs) node->output_metas().push_back(meta_of(out));
  if (op.schema().mutates >= 0) {
    // As for out-of-place ops, a tensor of a non-floating dtype never takes on a gradient history.
    if (is_floating(outputs[0].dtype())) rebase_history(outputs[0], node);
  } else {
    for (size_t i = 0; i < outputs.size(); ++i) {
      if (!is_floating(outputs[i].dtype())) continue;
      AutogradMeta& meta = outputs[i].impl()->autograd();
      meta.grad_fn = node;
      meta.output_nr = static_cast<uint32_t>(i);
      if (outputs[i].impl()->view_base()) meta.view_version = outputs[i].impl()->storage()->version();
    }
  }
  // After the outputs are linked to the node: a saved output must know it requires grad, so that
  // unpacking it for double backward re-links it to this node.
  node->save_outputs(outputs);
}

}  // namespace tg::tape
