// compile(): trace a function and its backward once per input signature, then run the graphs.
#pragma once

#include <memory>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "graphs/counters.h"
#include "graphs/joint.h"
#include "graphs/partition.h"

namespace tg {

// How compile() executes and partitions.
struct CompileOptions {
  std::string backend = "aot_eager";    // "eager" (no graphs), "aot_eager" (interpreter) or "cudagraphs"
  std::string partitioner = "default";  // "default" or "min_cut"
  int cache_limit = 8;                  // compiled variants per function before falling back to eager
  bool fullgraph = false;               // raise on data-dependent code instead of running it eagerly
  int cudagraph_max_recordings = 8;     // recordings per segment (new static addresses) before eager
  std::vector<std::string> input_names; // names used in recompile reasons (default: "input N")
};

namespace graphs {

struct CompiledEntry;

// The type-erased core of a compiled function: guards, cache, tracing, executors, counters.
class CompiledFunction {
 public:
  CompiledFunction(GraphFn fn, CompileOptions options);
  // Runs the function on `args` (compiling for this signature on first sight).
  TensorList call(const TensorList& args);
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

}  // namespace graphs

// A compiled callable: call it like the original function with Tensor arguments.
template <typename F>
class Compiled {
 public:
  Compiled(F fn, CompileOptions options) : fn_(std::make_shared<F>(std::move(fn))), options_(std::move(options)) {}

  template <typename... Args>
  auto operator()(const Args&... args) {
    static_assert((std::is_convertible_v<Args, Tensor> && ...), "compiled functions take Tensor arguments");
    using R = std::decay_t<std::invoke_result_t<F&, const Args&...>>;
    using Adapter = graphs::ResultAdapter<R>;
    if (!core_) {
      auto fn = fn_;
      core_ = std::make_shared<graphs::CompiledFunction>(
          [fn](const TensorList& xs) {
            return [&]<size_t... I>(std::index_sequence<I...>) {
              if constexpr (std::is_void_v<R>) {
                (*fn)(xs.at(I)...);
                return TensorList{};
              } else {
                return Adapter::to_list((*fn)(xs.at(I)...));
              }
            }(std::index_sequence_for<Args...>{});
          },
          options_);
    }
    return Adapter::from_list(core_->call(TensorList{Tensor(args)...}));
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
  std::shared_ptr<F> fn_;
  CompileOptions options_;
  std::shared_ptr<graphs::CompiledFunction> core_;
};

// Compiles `fn` (a callable taking Tensors and returning a Tensor, TensorList or tuple of Tensors).
template <typename F>
Compiled<F> compile(F fn, CompileOptions options = {}) {
  return Compiled<F>(std::move(fn), std::move(options));
}

}  // namespace tg
