// History rewriting for in-place ops: the written tensor (and, for views, its base) gets a new grad_fn.
#pragma once

#include <memory>

#include "autograd/op_node.h"

namespace tg {

// Makes `node` (an in-place op that wrote `target`) the producer of target's new value. When target
// is a view, the base's history becomes a CopySlices node, and the view is re-derived from the base.
void rebase_history(const Tensor& target, const std::shared_ptr<OpNode>& node);
// The same for any node (custom Functions) whose input `mutated_input` is the written tensor.
void rebase_history(const Tensor& target, const std::shared_ptr<Node>& node, int mutated_input);

// Derives a view's grad_fn again from its base's current history (an as_strided of the base), as
// PyTorch does for a view whose base was written in place after the view was taken: the view's
// old grad_fn would route its gradient around the write. Records the storage version it saw.
void regenerate_view_history(const Tensor& view);

// Backward of an in-place op applied to a view: routes the op's gradient into the view's region
// of the base's gradient (PyTorch's CopySlices).
class CopySlices final : public Node {
 public:
  CopySlices(const Tensor& base, const Tensor& view, std::shared_ptr<Node> fn, int mutated_input);
  TensorList apply(TensorList&& grad_outputs) override;
  std::string name() const override { return "CopySlices"; }
  void release_saved() override { fn_->release_saved(); }

 private:
  TensorMeta base_;
  TensorMeta view_;
  std::shared_ptr<Node> fn_;
  size_t mutated_;
};

}  // namespace tg
