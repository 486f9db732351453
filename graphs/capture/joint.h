// Tracing a function and its backward into one joint graph (AOTAutograd's first step).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "autograd/grad_reducer.h"
#include "graphs/ir/graph.h"
#include "ops/core/guarded_value.h"

namespace tg::graphs {

// A function of tensors returning tensors, the form compile() traces.
using GraphFn = std::function<TensorList(const TensorList&)>;

// Where a joint-graph primal comes from: an argument of the call or a captured (lifted) tensor.
struct PrimalRef {
  InputKind kind = InputKind::Argument;  // Argument or Lifted
  int32_t index = 0;
};

// The tensor `p` names among a call's arguments and the captured tensors (as locked for that call).
inline const Tensor& primal(const PrimalRef& p, const TensorList& args, const TensorList& captured) {
  return p.kind == InputKind::Argument ? args[static_cast<size_t>(p.index)] : captured[static_cast<size_t>(p.index)];
}

// An output that aliases a caller's tensor: rebuilt at run time as a view of that tensor.
struct OutputAlias {
  PrimalRef source;
  Shape sizes;
  Shape strides;
  int64_t storage_offset = 0;
};

// A cross-process gradient reduction folded into the backward graph: its reducer and the leaves it
// reduces, held weakly (a cached graph keeps no model alive).
struct GradReduction {
  std::weak_ptr<GradReducer> reducer;
  std::vector<std::weak_ptr<TensorImpl>> leaves;
};

// The joint graph plus what the runtime needs to interpret its outputs.
struct JointGraph {
  Graph graph;  // inputs: arguments, lifted tensors, tangents; outputs: see below
  TensorList lifted;                       // captured real tensors, by Lifted index (compile() then holds them weakly)
  std::vector<HostGuard> host_guards;      // host values the trace specialized on
  size_t num_user_outputs = 0;             // graph.outputs[0 .. n): the function's outputs
  std::vector<PrimalRef> mutated;          // next: final contents of inputs the function wrote into
  std::vector<PrimalRef> grad_primals;     // next: gradients of these primals (if any output needs grad)
  std::vector<bool> output_requires_grad;  // per user output
  std::vector<std::optional<OutputAlias>> output_aliases;  // per user output
  std::vector<int32_t> duplicate_of;       // per argument: earlier argument sharing its storage, or -1
  bool grad_enabled_after = true;          // grad mode when the function returned
  std::vector<ValueId> tangent_values;     // per output requiring grad, in order
  bool backward_refused = false;           // the backward would need double backward: refused when run
  std::vector<GradReduction> reductions;   // reducers whose communication the backward graph holds
};

// Thrown by trace_joint for functions it can trace only by giving up on graphs (compile() then runs
// that input signature eagerly, and records the reason).
class TraceFallback : public Error {
 public:
  using Error::Error;
};

// Traces fn on fake stand-ins of args (no kernels run). Throws DataDependentError when fn reads
// a traced value on the host.
JointGraph trace_joint(const GraphFn& fn, const TensorList& args);

}  // namespace tg::graphs
