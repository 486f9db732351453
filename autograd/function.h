// Custom autograd Functions in libtorch's style: a forward and a hand-written backward as one tape node.
//
//   struct Scale : tg::Function<Scale> {
//     static Tensor forward(AutogradContext* ctx, Tensor x, double k) {
//       ctx->saved_data["k"] = k;
//       return x * k;
//     }
//     static TensorList backward(AutogradContext* ctx, TensorList grads) {
//       return {grads[0] * std::get<double>(ctx->saved_data["k"])};
//     }
//   };
//   Tensor y = Scale::apply(x, 2.0);
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <typeinfo>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <variant>
#include <vector>

#include "autograd/node.h"
#include "autograd/saved_tensor.h"
#include "tensor/grad_mode.h"
#include "tensor/tensor.h"
#include "tensor/tensor_meta.h"

namespace tg {

// A non-tensor value kept for backward. Tensors are not allowed here: they go through
// save_for_backward so that in-place changes are detected and outputs do not form reference cycles.
using SavedValue = std::variant<bool, int64_t, double, std::string, Shape, std::vector<double>>;

class CustomNodeBase;

// The `ctx` a custom Function's forward and backward share.
class AutogradContext {
 public:
  AutogradContext() = default;
  AutogradContext(const AutogradContext&) = delete;
  AutogradContext& operator=(const AutogradContext&) = delete;

  // Keeps tensors for backward (inputs or outputs of forward); each is version-checked when read back.
  void save_for_backward(TensorList to_save);
  // The tensors given to save_for_backward; throws if one was modified in place since or if the
  // graph was freed by an earlier backward without retain_graph.
  TensorList get_saved_variables() const;
  // Declares inputs that forward modified in place; they are returned as outputs with new history.
  void mark_dirty(const TensorList& inputs);
  // Declares outputs that have no gradient (indices, masks); they never require grad.
  void mark_non_differentiable(const TensorList& outputs);
  // When true (the default), backward sees zeros instead of undefined gradients for unused outputs.
  void set_materialize_grads(bool value) { materialize_grads_ = value; }
  // Whether the tensor input at `index` (counting tensor arguments only) needs a gradient.
  bool needs_input_grad(size_t index) const;

  // Non-tensor values for backward, keyed by name.
  std::unordered_map<std::string, SavedValue> saved_data;

 private:
  friend class CustomNodeBase;
  friend struct FunctionCall;
  std::weak_ptr<CustomNodeBase> node_;
  std::vector<bool> needs_input_grad_;
  TensorList to_save_;
  std::vector<SavedTensor> saved_;
  std::unordered_set<const TensorImpl*> dirty_;
  std::unordered_set<const TensorImpl*> non_differentiable_;
  bool materialize_grads_ = true;
  bool packed_ = false;  // saved_ holds the version-checked copies of to_save_
};

// The tape node of a custom Function: runs the user's backward on the context.
class CustomNodeBase : public Node {
 public:
  TensorList apply(TensorList&& grad_outputs) override;
  std::string name() const override { return name_; }
  void release_saved() override;
  AutogradContext& context() { return ctx_; }

 protected:
  explicit CustomNodeBase(std::string name) : name_(std::move(name)) {}
  // The user's backward.
  virtual TensorList call_backward(AutogradContext* ctx, TensorList grads) = 0;

 private:
  friend struct FunctionCall;
  std::string name_;
  AutogradContext ctx_;
  std::vector<TensorMeta> input_metas_;
  std::vector<bool> output_defined_;
};

// The node type for Function T.
template <class T>
class CustomNode final : public CustomNodeBase {
 public:
  explicit CustomNode(std::string name) : CustomNodeBase(std::move(name)) {}

 protected:
  TensorList call_backward(AutogradContext* ctx, TensorList grads) override {
    return T::backward(ctx, std::move(grads));
  }
};

// The type-independent steps of Function<T>::apply.
struct FunctionCall {
  // "MyFnBackward" from the mangled type name of MyFn.
  static std::string node_name(const char* mangled);
  // Prepares the context (needs_input_grad) and, when any input needs a gradient, the node's edges.
  static void begin(AutogradContext& ctx, const std::shared_ptr<CustomNodeBase>& node, const TensorList& inputs);
  // Turns forward's raw outputs into the results: history on differentiable outputs, aliases for
  // returned inputs, rebased history for dirty inputs; then saves the tensors for backward.
  static TensorList finish(AutogradContext& ctx, const std::shared_ptr<CustomNodeBase>& node,
                           const TensorList& inputs, TensorList outputs);
};

namespace detail {

inline void collect_tensors(TensorList&) {}
template <typename A, typename... Rest>
void collect_tensors(TensorList& out, A&& arg, Rest&&... rest) {
  using D = std::decay_t<A>;
  if constexpr (std::is_same_v<D, Tensor>) {
    out.push_back(arg);
  } else if constexpr (std::is_same_v<D, TensorList>) {
    out.insert(out.end(), arg.begin(), arg.end());
  }
  collect_tensors(out, std::forward<Rest>(rest)...);
}

}  // namespace detail

// Base for user Functions (CRTP): T provides static forward(AutogradContext*, args...) returning
// Tensor or TensorList and static backward(AutogradContext*, TensorList) returning one gradient
// per tensor argument of forward (an undefined Tensor means "no gradient").
template <class T>
struct Function {
  // Runs T::forward without recording and records one node whose backward is T::backward.
  template <typename... Args>
  static auto apply(Args&&... args) {
    using Out = std::decay_t<decltype(T::forward(std::declval<AutogradContext*>(), std::forward<Args>(args)...))>;
    static_assert(std::is_same_v<Out, Tensor> || std::is_same_v<Out, TensorList>,
                  "a custom Function's forward must return Tensor or TensorList");
    TensorList inputs;
    detail::collect_tensors(inputs, args...);
    auto node = std::make_shared<CustomNode<T>>(FunctionCall::node_name(typeid(T).name()));
    AutogradContext& ctx = node->context();
    FunctionCall::begin(ctx, node, inputs);
    TensorList outputs;
    {
      GradModeGuard no_grad(false);
      if constexpr (std::is_same_v<Out, Tensor>) {
        outputs.push_back(T::forward(&ctx, std::forward<Args>(args)...));
      } else {
        outputs = T::forward(&ctx, std::forward<Args>(args)...);
      }
    }
    outputs = FunctionCall::finish(ctx, node, inputs, std::move(outputs));
    if constexpr (std::is_same_v<Out, Tensor>) {
      return outputs[0];
    } else {
      return outputs;
    }
  }
};

}  // namespace tg
