// Gradient reduction across processes (data parallelism), as seen by autograd and compile().
#pragma once

#include <memory>
#include <utility>
#include <vector>

#include "tensor/tensor.h"

namespace tg {

// Reduces the gradients of a group of leaves (a data-parallel module's parameters) across
// processes. Attached to each leaf (AutogradMeta::grad_reducer). Eager backwards reach it through the
// leaves' post-accumulate hooks; compile() instead folds reduce() into the backward graph, so the
// communication is captured with the rest of the backward, and tells the reducer so before the graph
// runs (the reducer must then not reduce those gradients a second time).
class GradReducer {
 public:
  virtual ~GradReducer() = default;
  // Whether gradients are reduced now (false inside no_sync()); read under tracing, so it is guarded.
  virtual bool reducing() const = 0;
  // The reduced gradients of `leaves`, given their local gradients (undefined: the leaf got none),
  // computed with ops so that they trace. Called once per backward graph with every leaf of this
  // reducer that the graph produces a gradient for.
  virtual TensorList reduce(const std::vector<std::shared_ptr<TensorImpl>>& leaves, const TensorList& grads) = 0;
  // reduce() for a reducer that keeps its results elsewhere: besides the gradients of `leaves`
  // (undefined for those that get none), it appends to `elsewhere` (leaf, traced gradient) pairs for
  // leaves outside `leaves`, which compile() adds to the backward graph's outputs, accumulated into
  // those leaves' .grad as any leaf's gradient is. ZeRO stage 2 keeps only this rank's block of the
  // averaged gradients, in a shard parameter of its own. The default is reduce(), nothing elsewhere.
  virtual TensorList reduce_elsewhere(const std::vector<std::shared_ptr<TensorImpl>>& leaves, const TensorList& grads,
                                      std::vector<std::pair<Tensor, Tensor>>& elsewhere) {
    (void)elsewhere;
    return reduce(leaves, grads);
  }
  // A compiled backward is about to deliver already reduced gradients for `leaves`.
  virtual void expect_reduced(const std::vector<std::shared_ptr<TensorImpl>>& leaves) = 0;
};

}  // namespace tg
