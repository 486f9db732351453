// Records dispatched ops on fake tensors into a Graph, functionalizing in-place ops as it goes.
#pragma once

#include <string>
#include <unordered_map>
#include <unordered_set>

#include "autograd/node.h"
#include "graphs/ir/graph.h"
#include "ops/core/dispatch.h"

namespace tg::graphs {

// An OpObserver that turns the ops of a traced function into graph nodes. Tensors are tracked by
// identity and by storage: each storage has a current "base" value, so a write through any alias
// becomes an out-of-place node (plus a view_scatter into the base), and a later read of a stale
// alias is regenerated from the base. Real tensors the function captured are lifted into inputs;
// ops whose inputs are all CPU constants run for real and are folded into constants.
class Tracer final : public OpObserver {
 public:
  explicit Tracer(Graph& graph) : graph_(graph) {}

  // A data-less stand-in for a caller's tensor, registered as graph input (kind, index).
  Tensor add_input(const Tensor& real, InputKind kind, int32_t index, const std::string& name);
  // A stand-in for an argument that shares storage with an earlier argument's stand-in.
  Tensor add_aliased_input(const Tensor& real, const Tensor& earlier_proxy);
  // Phase recorded on the nodes that follow (backward nodes get the running tape node's sequence nr).
  void set_phase(Phase phase) { phase_ = phase; }
  // The graph value holding t's current contents (regenerating a view of a mutated base if needed);
  // -1 for an undefined tensor.
  ValueId value_of(const Tensor& t);
  // Real tensors captured by the function, in the order of their Lifted inputs.
  const TensorList& lifted() const { return lifted_; }
  // Whether t is a real tensor from outside the function that the graph does not know yet.
  bool is_outside(const Tensor& t) const;
  // The stand-in of a real tensor from outside the function (a parameter), lifted into a graph
  // input by identity on first sight.
  Tensor lift(const Tensor& real);
  // Stand-ins of the lifted tensors, parallel to lifted().
  const TensorList& lifted_proxies() const { return lifted_proxy_list_; }
  // Where gradients for input stand-in `proxy` arrive, as recorded before the function ran (an
  // in-place write to the input later gives it new history, but its gradient is still taken here).
  const Edge& input_edge(const Tensor& proxy) const;
  // True when the input behind `proxy` required grad when the function was called (an in-place
  // write of a value that requires grad does not make it a differentiable input).
  bool has_input_edge(const Tensor& proxy) const { return input_edges_.count(proxy.impl()) > 0; }
  // True when some op wrote into the storage of `proxy` (an input stand-in).
  bool was_mutated(const Tensor& proxy) const;

  void before_op(const OpPtr& op, TensorList& inputs) override;
  bool wants_fake_outputs(const OpPtr& op, const TensorList& inputs) override;
  void on_op(const OpPtr& op, const TensorList& inputs, const TensorList& outputs) override;
  void on_host_guard(HostGuard guard) override { host_guards_.push_back(std::move(guard)); }
  // Host values the traced code read through Guarded<T>, in the order read.
  const std::vector<HostGuard>& host_guards() const { return host_guards_; }

 private:
  // What the graph knows about one storage: the value holding its contents and that value's geometry.
  struct StorageState {
    ValueId base = -1;
    TensorMeta base_meta;
    bool mutated = false;
  };
  // The value a tensor was last bound to, valid while its storage's version is unchanged.
  struct TensorState {
    ValueId value = -1;
    const StorageImpl* storage = nullptr;
    uint64_t version = 0;
  };

  bool is_constant(const Tensor& t) const;
  // The graph value of t's current contents, without binding it (regenerating a view if needed).
  ValueId resolve(const Tensor& t);
  // An operand's value before an in-place write into storage `written` that already happened.
  ValueId value_before_write(const Tensor& t, const StorageImpl* written);
  void record_constant_outputs(const TensorList& outputs);
  void record_inplace(const OpPtr& op, const TensorList& inputs, const TensorList& outputs);
  // Makes `nv` (the functionalized result of in-place `op`) the new contents of `target`'s memory.
  void commit_write(const Op& op, const Tensor& target, ValueId nv, const TensorList& outputs);
  void record_set(const TensorList& inputs);
  void bind(const Tensor& t, ValueId v);
  // Appends a node in the current phase (forward nodes carry the open checkpoint region).
  void add_node(OpPtr op, std::vector<ValueId> ins, std::vector<ValueId> outs, int64_t sequence_nr);
  ValueId new_value(const Tensor& t, std::string_view stem);
  int64_t current_sequence_nr(const TensorList& outputs) const;

  Graph& graph_;
  Phase phase_ = Phase::Forward;
  std::unordered_map<const StorageImpl*, StorageState> storages_;
  std::unordered_map<const TensorImpl*, TensorState> tensors_;
  std::unordered_set<const StorageImpl*> constant_storages_;
  std::unordered_map<const TensorImpl*, Tensor> lifted_proxies_;
  std::unordered_map<const TensorImpl*, Edge> input_edges_;
  TensorList lifted_;
  TensorList lifted_proxy_list_;
  std::vector<HostGuard> host_guards_;
  std::vector<const StorageImpl*> pending_writes_;  // storages in-place ops wrote, not yet recorded
  TensorList keep_alive_;  // every traced tensor stays alive so addresses are never reused
  int name_counter_ = 0;
};

}  // namespace tg::graphs
