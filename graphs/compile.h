// compile(): trace a function and its backward once per input signature, then run the graphs.
#pragma once

#include <memory>
#include <string>
#include <tuple>
#include <type_traits>
#include <typeinfo>
#include <utility>
#include <vector>

#include "graphs/calls/dynamic_scalar.h"
#include "graphs/calls/flatten_call.h"
#include "graphs/calls/shape_buckets.h"
#include "graphs/capture/guards.h"
#include "graphs/capture/joint.h"
#include "graphs/compile_options.h"
#include "graphs/counters.h"
#include "graphs/partition/partition.h"

namespace tg::graphs {

// The type-erased core of a compiled function: guards, cache, tracing, executors, counters.
class CompiledFunction {
 public:
  // Checks the options (backend, partitioner, cache_limit, strict_capture); compiles nothing yet.
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

  // Internal state (defined in graphs/compiled_entry.h).
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
