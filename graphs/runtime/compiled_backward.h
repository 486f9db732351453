// The tape node that compiled forwards attach to their outputs: it runs the backward graph.
#pragma once

#include <functional>
#include <memory>
#include <mutex>

#include "autograd/node.h"

namespace tg::graphs {

// Fixed-address tangents of 1 for the one-element outputs of one compiled function, shared by the
// backward nodes of all its calls: a backward started at such an output (loss.backward()) reads it in
// place, so a CUDA graph of the backward needs neither a fill nor a copy for it.
class UnitTangents {
 public:
  // The 1 for output `k` with metadata `meta`: made on first use, made anew if anything wrote into it.
  Tensor get(size_t k, const TensorMeta& meta);
  // True when `t` shares memory with one of them.
  bool holds(const Tensor& t) const;

 private:
  mutable std::mutex mutex_;
  std::vector<Tensor> ones_;
  std::vector<uint64_t> versions_;
};

// Runs a compiled backward graph on (saved values, tangents). Double backward is refused, as
// AOTAutograd refuses it.
class CompiledBackward final : public Node {
 public:
  // run_backward(saved, tangents) returns one gradient per next edge.
  using Runner = std::function<TensorList(TensorList saved, const TensorList& tangents)>;

  // `pending` (may be null) is held until the backward has run or the node is gone; `units` (may be
  // null) gives the implicit starting gradients.
  CompiledBackward(Runner runner, TensorList saved, std::vector<TensorMeta> tangent_metas,
                   std::shared_ptr<void> pending = nullptr, std::shared_ptr<UnitTangents> units = nullptr);
  TensorList apply(TensorList&& grad_outputs) override;
  Tensor implicit_root_gradient(uint32_t output_nr) override;
  std::string name() const override { return "CompiledFunctionBackward"; }
  void release_saved() override;
  void will_release_saved() override { hand_over_saved_ = true; }

 private:
  Runner runner_;
  TensorList saved_;
  std::shared_ptr<void> pending_;
  std::shared_ptr<UnitTangents> units_;
  bool released_ = false;
  bool hand_over_saved_ = false;  // the next apply() gives the saved values to the backward graph
};

}  // namespace tg::graphs
