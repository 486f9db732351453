// The tape node that compiled forwards attach to their outputs: it runs the backward graph.
#pragma once

#include <functional>
#include <memory>

#include "autograd/node.h"

namespace tg::graphs {

// Runs a compiled backward graph on (saved values, tangents). Double backward is refused, as
// AOTAutograd refuses it.
class CompiledBackward final : public Node {
 public:
  // run_backward(saved, tangents) returns one gradient per next edge.
  using Runner = std::function<TensorList(TensorList saved, const TensorList& tangents)>;

  // `pending` (may be null) is held until the backward has run or the node is gone.
  CompiledBackward(Runner runner, TensorList saved, std::vector<TensorMeta> tangent_metas,
                   std::shared_ptr<void> pending = nullptr);
  TensorList apply(TensorList&& grad_outputs) override;
  std::string name() const override { return "CompiledFunctionBackward"; }
  void release_saved() override;
  void will_release_saved() override { hand_over_saved_ = true; }

 private:
  Runner runner_;
  TensorList saved_;
  std::shared_ptr<void> pending_;
  bool released_ = false;
  bool hand_over_saved_ = false;  // the next apply() gives the saved values to the backward graph
};

}  // namespace tg::graphs
