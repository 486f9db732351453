// The tape node recorded for a dispatched op: saved tensors plus the op's backward().
#pragma once

#include <vector>

#include "autograd/node.h"
#include "autograd/saved_tensor.h"
#include "ops/core/op.h"
#include "tensor/memory/cpu_allocator.h"

namespace tg {

// Runs op->backward() on gradients of the op's outputs; named "<Op>Backward0" as in PyTorch.
class OpNode final : public Node {
 public:
  OpNode(OpPtr op, const TensorList& inputs);
  // Saves the inputs if the op's SaveSpec asks for them; called before the op's kernel runs.
  void save_inputs(const TensorList& inputs);
  // Saves the outputs if the op's SaveSpec asks for them; called once they are linked to this node.
  void save_outputs(const TensorList& outputs);
  TensorList apply(TensorList&& grad_outputs) override;
  std::string name() const override;
  void release_saved() override;
  const OpPtr& op() const { return op_; }

 private:
  friend class OpNodeContext;
  OpPtr op_;
  // In the CPU allocator's small blocks: every recorded op makes these.
  template <typename T>
  using NodeVector = std::vector<T, SmallObjectAllocator<T>>;
  NodeVector<TensorMeta> input_metas_;
  NodeVector<SavedTensor> saved_inputs_;
  NodeVector<SavedTensor> saved_outputs_;
};

// Leaf sink: adds the incoming gradient into the leaf's .grad after running its hooks.
class AccumulateGrad final : public Node {
 public:
  explicit AccumulateGrad(const std::shared_ptr<TensorImpl>& leaf);
  TensorList apply(TensorList&& grad_outputs) override;
  std::string name() const override { return "AccumulateGrad"; }
  // The leaf this node accumulates into (null once the leaf is gone).
  std::shared_ptr<TensorImpl> leaf() const { return leaf_.lock(); }

 private:
  std::weak_ptr<TensorImpl> leaf_;
};

// The edge a gradient for `t` must flow into: its grad_fn, or its (created on demand) accumulator.
Edge gradient_edge(const Tensor& t);

}  // namespace tg
