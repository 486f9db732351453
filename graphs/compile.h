// compile(): trace a function and its backward once per input signature, then run the graphs.
#pragma once

#include <cstdio>
#include <memory>
#include <string>
#include <tuple>
#include <type_traits>
#include <typeinfo>
#include <utility>
#include <vector>

#include "graphs/capture/guards.h"
#include "graphs/capture/joint.h"
#include "graphs/compile_options.h"
#include "graphs/counters.h"
#include "graphs/dynamic_scalar.h"
#include "graphs/partition/partition.h"
#include "graphs/shape_buckets.h"

namespace tg::graphs {

// The type-erased core of a compiled function: guards, cache, tracing, executors, counters.
class CompiledFunction {
 public:
  CompiledFunction(GraphFn fn, CompileOptions options);
  // Runs the function on `args` (compiling for this signature on first sight).
  TensorList call(const TensorList& args);
  // Runs the function on a flattened call (tensors plus non-tensor arguments guarded by value).
  TensorList call(const CallArgs& call);
  // What happened so far.
  const CompileCounters& counters() const;
  // Graphs of the most recent compilation (null before the first).
  const JointGraph* last_joint() const;
  const Partition* last_partition() const;

  // Internal state (defined in compile.cpp).
  struct State;

 private:
  std::shared_ptr<State> state_;
};

// The forward graph of a function, traced once for sample inputs without tracing the joint
// (AOTAutograd's aot_export_joint_simple with trace_joint=False). It runs on new inputs of the
// same signature (nothing is guarded), op by op through the dispatcher like eager code.
class ExportedForward {
 public:
  ExportedForward(const GraphFn& fn, const TensorList& sample_inputs);
  // The traced forward graph: inputs are the arguments, then the captured tensors.
  const Graph& graph() const { return joint_->graph; }
  // Tensors the function captured (parameters), inputs of the graph after the arguments.
  const TensorList& captured() const { return joint_->lifted; }
  // Runs the graph; inputs the function wrote into receive the writes, as in eager.
  TensorList operator()(const TensorList& inputs) const;

 private:
  std::shared_ptr<JointGraph> joint_;
  std::vector<TensorMeta> input_metas_;
};

// Exports the forward graph of `fn` for `sample_inputs` (trace_joint = false).
ExportedForward export_forward(const GraphFn& fn, const TensorList& sample_inputs);

// Tensor, TensorList, std::vector<Tensor> or std::tuple of Tensors <-> TensorList.
template <typename R>
struct ResultAdapter;
template <>
struct ResultAdapter<Tensor> {
  static TensorList to_list(const Tensor& t) { return {t}; }
  static Tensor from_list(TensorList&& l) { return std::move(l.at(0)); }
};
template <>
struct ResultAdapter<TensorList> {
  static TensorList to_list(const TensorList& l) { return l; }
  static TensorList from_list(TensorList&& l) { return std::move(l); }
};
template <>
struct ResultAdapter<void> {
  static void from_list(TensorList&&) {}
};
template <typename... Ts>
struct ResultAdapter<std::tuple<Ts...>> {
  static TensorList to_list(const std::tuple<Ts...>& t) {
    return std::apply([](const auto&... x) { return TensorList{x...}; }, t);
  }
  static std::tuple<Ts...> from_list(TensorList&& l) {
    return [&]<size_t... I>(std::index_sequence<I...>) { return std::tuple<Ts...>{std::move(l.at(I))...}; }(
        std::index_sequence_for<Ts...>{});
  }
};

}  // namespace tg::graphs

namespace tg::graphs::detail {

template <typename T>
struct is_vector : std::false_type {};
template <typename T>
struct is_vector<std::vector<T>> : std::true_type {};

// How one argument of a compiled call is treated: a tensor or a dynamic scalar (a graph input), a
// list of tensors (flattened into graph inputs), a host value guarded by value, or an object passed
// by reference (guarded by identity).
template <typename A>
struct ArgTraits {
  using D = std::decay_t<A>;
  static constexpr bool dynamic = std::is_same_v<D, DynamicScalar>;
  static constexpr bool tensor = std::is_same_v<D, Tensor> || std::is_base_of_v<Tensor, D> || dynamic;
  static constexpr bool tensor_list = std::is_same_v<D, std::vector<Tensor>> || std::is_same_v<D, TensorList>;
  static constexpr bool scalar = std::is_arithmetic_v<D> || std::is_same_v<D, std::string> ||
                                 std::is_same_v<D, const char*> || std::is_same_v<D, char*>;
  static constexpr bool int_list = is_vector<D>::value && !tensor_list;
};

template <typename D>
HostValue to_host_value(const D& v) {
  if constexpr (std::is_same_v<D, bool>) return HostValue(v);
  else if constexpr (std::is_integral_v<D>) return HostValue(static_cast<int64_t>(v));
  else if constexpr (std::is_floating_point_v<D>) return HostValue(static_cast<double>(v));
  else return HostValue(std::string(v));
}

// Appends argument `a` (named `who`) to the flattened call.
template <typename A>
void flatten_arg(const A& a, const std::string& who, CallArgs& out) {
  using T = ArgTraits<A>;
  if constexpr (T::dynamic) {
    // A graph input like a tensor: guarded on dtype and shape, its value read when the graph runs.
    out.tensors.push_back(a.tensor());
    out.names.push_back(who + " (dynamic scalar)");
  } else if constexpr (T::tensor) {
    out.tensors.push_back(a);
    out.names.push_back(who);
  } else if constexpr (T::tensor_list) {
    out.host.push_back({"len(" + who + ")", HostValue(static_cast<int64_t>(a.size()))});
    for (size_t k = 0; k < a.size(); ++k) {
      out.tensors.push_back(a[k]);
      out.names.push_back(who + "[" + std::to_string(k) + "]");
    }
  } else if constexpr (T::scalar) {
    out.host.push_back({who, to_host_value(a)});
  } else if constexpr (T::int_list) {
    static_assert(std::is_arithmetic_v<typename std::decay_t<A>::value_type>,
                  "compiled functions take Tensors, std::vector<Tensor>, scalars, strings, vectors of numbers "
                  "and objects by reference");
    out.host.push_back({"len(" + who + ")", HostValue(static_cast<int64_t>(a.size()))});
    for (size_t k = 0; k < a.size(); ++k) out.host.push_back({who + "[" + std::to_string(k) + "]", to_host_value(a[k])});
  } else {
    // An object by reference (a module): the graph is specialized on which object it is.
    char buf[32];
    std::snprintf(buf, sizeof buf, "%p", static_cast<const void*>(&a));
    out.host.push_back({who + " (by reference)", HostValue(std::string("object at ") + buf)});
  }
}

// What the traced function receives for argument `a`: graph inputs for tensors, the call's own
// value otherwise. `pos` walks the flattened tensors.
template <typename A>
decltype(auto) unflatten_arg(std::decay_t<A>& a, const TensorList& xs, size_t& pos) {
  using T = ArgTraits<A>;
  if constexpr (T::tensor) {
    return Tensor(xs.at(pos++));
  } else if constexpr (T::tensor_list) {
    std::vector<Tensor> out(xs.begin() + static_cast<ptrdiff_t>(pos), xs.begin() + static_cast<ptrdiff_t>(pos + a.size()));
    pos += a.size();
    return out;
  } else {
    return (a);
  }
}

template <typename A>
using UnflatType = std::conditional_t<ArgTraits<A>::tensor, Tensor,
                                      std::conditional_t<ArgTraits<A>::tensor_list, std::vector<Tensor>, std::decay_t<A>&>>;

}  // namespace tg::graphs::detail

namespace tg {

// A compiled callable: call it like the original function. Arguments may mix Tensors,
// std::vector<Tensor> (flattened into graph inputs), int64_t/double/bool/std::string and
// std::vector<int64_t> (guarded by value: a change recompiles), numbers declared dynamic with
// tg::dynamic(x) (graph inputs: the function takes a 0-dim Tensor, and a new value never recompiles)
// and objects such as modules passed by reference (guarded by identity).
template <typename F>
class Compiled {
 public:
  Compiled(F fn, CompileOptions options)
      : fn_(std::make_shared<F>(std::move(fn))), options_(std::move(options)),
        current_(std::make_shared<const void*>(nullptr)) {}

  template <typename... Args>
  auto operator()(Args&&... args) {
    // The call's arguments by address (one layout per argument types, whatever their value category).
    using Tuple = std::tuple<std::decay_t<Args>*...>;
    using R = std::decay_t<std::invoke_result_t<F&, graphs::detail::UnflatType<Args>...>>;
    using Adapter = graphs::ResultAdapter<R>;
    const std::type_info& signature = typeid(Tuple);
    if (!core_) {
      auto fn = fn_;
      auto current = current_;
      signature_ = &signature;
      core_ = std::make_shared<graphs::CompiledFunction>(
          [fn, current](const TensorList& xs) {
            const Tuple& call = *static_cast<const Tuple*>(*current);
            return [&]<size_t... I>(std::index_sequence<I...>) {
              size_t pos = 0;
              // Braced initialization evaluates left to right, so tensors are taken in order.
              std::tuple<graphs::detail::UnflatType<Args>...> unflat{
                  graphs::detail::unflatten_arg<Args>(*std::get<I>(call), xs, pos)...};
              if constexpr (std::is_void_v<R>) {
                std::apply(*fn, std::move(unflat));
                return TensorList{};
              } else {
                return Adapter::to_list(std::apply(*fn, std::move(unflat)));
              }
            }(std::index_sequence_for<Args...>{});
          },
          options_);
    }
    TG_CHECK(*signature_ == signature, "[compile] a compiled function must be called with the same argument types "
             "every time; first call: ", signature_->name(), ", now: ", signature.name());
    const Tuple call{const_cast<std::decay_t<Args>*>(std::addressof(args))...};
    graphs::CallArgs flat;
    [&]<size_t... I>(std::index_sequence<I...>) {
      (graphs::detail::flatten_arg(*std::get<I>(call), arg_name(I), flat), ...);
    }(std::index_sequence_for<Args...>{});
    const void* previous = *current_;
    *current_ = &call;
    struct Restore {
      std::shared_ptr<const void*> slot;
      const void* value;
      ~Restore() { *slot = value; }
    } restore{current_, previous};
    return Adapter::from_list(core_->call(flat));
  }

  // Counters of this function (compilations, recompiles with reasons, fallbacks, op counts).
  const graphs::CompileCounters& counters() const { return core().counters(); }
  // Graphs of the most recent compilation.
  const graphs::JointGraph* last_joint() const { return core().last_joint(); }
  const graphs::Partition* last_partition() const { return core().last_partition(); }

 private:
  const graphs::CompiledFunction& core() const {
    TG_CHECK(core_ != nullptr, "[compile] the function has not been called yet");
    return *core_;
  }
  std::string arg_name(size_t i) const {
    return i < options_.input_names.size() ? "input '" + options_.input_names[i] + "'" : "input " + std::to_string(i);
  }
  std::shared_ptr<F> fn_;
  CompileOptions options_;
  std::shared_ptr<const void*> current_;  // the call being run, read by the traced function
  const std::type_info* signature_ = nullptr;
  std::shared_ptr<graphs::CompiledFunction> core_;
};

// Compiles `fn` (a callable taking Tensors, tensor lists, scalars, strings, integer lists or objects
// by reference, and returning a Tensor, TensorList or tuple of Tensors).
template <typename F>
Compiled<F> compile(F fn, CompileOptions options = {}) {
  return Compiled<F>(std::move(fn), std::move(options));
}

}  // namespace tg
