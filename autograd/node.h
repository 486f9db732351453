// Tape nodes: each maps gradients of its outputs to gradients of its inputs along its edges.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tensor/tensor.h"
#include "tensor/tensor_meta.h"

namespace tg {

class Node;

// Where a gradient goes next: input `input_nr` of node `fn` (null fn: nowhere).
struct Edge {
  std::shared_ptr<Node> fn;
  uint32_t input_nr = 0;
  bool valid() const { return fn != nullptr; }
};

// A step of the backward pass.
class Node : public std::enable_shared_from_this<Node> {
 public:
  Node();
  virtual ~Node() = default;
  // Gradients w.r.t. this node's inputs (one per next edge) from gradients w.r.t. its outputs.
  virtual TensorList apply(TensorList&& grad_outputs) = 0;
  // The node's name as PyTorch prints it, e.g. "MulBackward0".
  virtual std::string name() const = 0;
  // The gradient a backward that starts at one-element output `output_nr` begins with when the caller
  // gives none: undefined (the default) lets the engine make a fresh 1. A node may hand out a
  // read-only 1 of its own instead (a compiled backward's fixed-address tangent), never letting it
  // escape into its results. Not asked when the graph is built for a higher-order backward or hooks
  // see that gradient.
  virtual Tensor implicit_root_gradient(uint32_t output_nr) {
    (void)output_nr;
    return Tensor();
  }
  // Drops saved tensors after a backward that does not retain the graph.
  virtual void release_saved() {}
  // Called just before apply() in a backward that does not retain the graph (release_saved()
  // follows it): the node may hand its saved tensors to the computation and let them go early.
  virtual void will_release_saved() {}

  const std::vector<Edge>& next_edges() const { return next_edges_; }
  std::vector<Edge>& mutable_next_edges() { return next_edges_; }
  // Order of creation; the engine runs later nodes first, and graphs map backward ops to it.
  uint64_t sequence_nr() const { return sequence_nr_; }
  // Metadata of each output this node receives a gradient for (to check and zero-fill grads).
  std::vector<TensorMeta>& output_metas() { return output_metas_; }

  // Marks a node recorded while a create_graph backward ran under graph tracing: differentiating
  // through it again while tracing is double backward, which compiled functions refuse.
  void mark_traced_double_backward() { traced_double_backward_ = true; }
  bool traced_double_backward() const { return traced_double_backward_; }

  // Hooks run on the gradient arriving for output `output_nr` before apply().
  void add_pre_hook(uint32_t output_nr, GradHook hook) { pre_hooks_[output_nr].push_back(std::move(hook)); }
  const std::map<uint32_t, std::vector<GradHook>>& pre_hooks() const { return pre_hooks_; }
  // retain_grad's hook for output `output_nr`: runs after every pre-hook of that output (as in
  // PyTorch), so the retained gradient is the one the tensor's own hooks produced.
  void add_retain_grad_hook(uint32_t output_nr, GradHook hook) { retain_grad_hooks_[output_nr] = std::move(hook); }
  const std::map<uint32_t, GradHook>& retain_grad_hooks() const { return retain_grad_hooks_; }

 private:
  std::vector<Edge> next_edges_;
  std::vector<TensorMeta> output_metas_;
  std::map<uint32_t, std::vector<GradHook>> pre_hooks_;
  std::map<uint32_t, GradHook> retain_grad_hooks_;
  uint64_t sequence_nr_;
  bool traced_double_backward_ = false;
};

}  // namespace tg
