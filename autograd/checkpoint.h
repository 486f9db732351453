// Activation checkpointing, as torch.utils.checkpoint.checkpoint(fn, *args, use_reentrant=False):
// the forward keeps none of fn's intermediate activations for backward (only fn's tensor inputs);
// the first backward step that needs one runs fn again, with gradient recording and with the random
// generator and autocast state fn first ran under, and hands out the activations it saved.
//
//   Tensor y = tg::checkpoint([&](const Tensor& x) { return block->forward(x); }, x);
//
// Gradients flow through the graph the forward recorded, so tensors fn captures (module
// parameters) get their gradients like the explicit arguments. Inside compile(), checkpoint only
// marks the ops fn records as one region, and the partitioner recomputes the region in the backward
// graph instead of saving its values (see graphs/partition/partition.cpp).
#pragma once

#include <cstdint>
#include <functional>
#include <tuple>
#include <type_traits>
#include <utility>

#include "tensor/tensor.h"

namespace tg {

// The type-erased checkpoint: fn maps its tensor inputs (`inputs`, in order) to its outputs.
TensorList checkpoint_tensors(std::function<TensorList(const TensorList&)> fn, const TensorList& inputs);

// The checkpoint region whose ops graph tracing is recording now (-1 when none): the tracer tags
// forward nodes with it. Nested checkpoints share their outermost region.
int32_t current_checkpoint_region();

// While alive on this thread, checkpoint() marks regions for graph tracing instead of dropping
// activations (compile() holds one while it traces a function).
class CheckpointTracingGuard {
 public:
  CheckpointTracingGuard();
  ~CheckpointTracingGuard();
  CheckpointTracingGuard(const CheckpointTracingGuard&) = delete;
  CheckpointTracingGuard& operator=(const CheckpointTracingGuard&) = delete;

 private:
  bool previous_;
  int32_t previous_region_;
};

namespace detail {

inline void append_tensors(TensorList&) {}
template <typename A, typename... Rest>
void append_tensors(TensorList& out, const A& a, const Rest&... rest) {
  if constexpr (std::is_same_v<A, Tensor>) {
    out.push_back(a);
  } else if constexpr (std::is_same_v<A, TensorList>) {
    out.insert(out.end(), a.begin(), a.end());
  }
  append_tensors(out, rest...);
}

// What the recomputation keeps of an argument: tensors only as places (the inputs are saved apart,
// so that an enclosing checkpoint can drop them too), other values as they are.
struct TensorSlot {};
struct TensorListSlot {
  size_t size = 0;
};
template <typename A>
auto slot_of(const A& a) {
  if constexpr (std::is_same_v<A, Tensor>) {
    return TensorSlot{};
  } else if constexpr (std::is_same_v<A, TensorList>) {
    return TensorListSlot{a.size()};
  } else {
    return a;
  }
}

// The argument kept as `s`, its tensors taken from `ts` (from position `pos` on).
template <typename S>
decltype(auto) substitute(const S& s, const TensorList& ts, size_t& pos) {
  if constexpr (std::is_same_v<S, TensorSlot>) {
    return Tensor(ts[pos++]);
  } else if constexpr (std::is_same_v<S, TensorListSlot>) {
    TensorList part(ts.begin() + static_cast<ptrdiff_t>(pos), ts.begin() + static_cast<ptrdiff_t>(pos + s.size));
    pos += s.size;
    return part;
  } else {
    return (s);
  }
}

}  // namespace detail

// Runs fn(args...) without keeping its activations for backward (see the top of this file). fn
// returns Tensor or TensorList; args are tensors, lists of tensors, or other values (passed to each
// run unchanged). Under no_grad it is fn(args...). Double backward (create_graph) through a
// checkpointed call is refused with an error.
template <typename F, typename... Args>
auto checkpoint(F&& fn, const Args&... args) {
  using Out = std::decay_t<std::invoke_result_t<F&, const Args&...>>;
  static_assert(std::is_same_v<Out, Tensor> || std::is_same_v<Out, TensorList>,
                "checkpoint: fn must return Tensor or TensorList");
  TensorList inputs;
  detail::append_tensors(inputs, args...);
  // The call with each tensor argument replaced by the run's own (the recomputation passes detached ones).
  auto call = [f = std::decay_t<F>(std::forward<F>(fn)),
               rest = std::make_tuple(detail::slot_of(args)...)](const TensorList& ts) mutable -> TensorList {
    size_t pos = 0;
    auto result = std::apply(
        [&](const auto&... a) {
          // Braced so that the substitutions run left to right.
          std::tuple<decltype(detail::substitute(a, ts, pos))...> subs{detail::substitute(a, ts, pos)...};
          return std::apply(f, subs);
        },
        rest);
    if constexpr (std::is_same_v<Out, Tensor>) {
      return TensorList{result};
    } else {
      return result;
    }
  };
  TensorList outs = checkpoint_tensors(std::move(call), inputs);
  if constexpr (std::is_same_v<Out, Tensor>) {
    return outs.at(0);
  } else {
    return outs;
  }
}

}  // namespace tg
