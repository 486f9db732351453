// See Note [Compile pipeline] in docs/compile_pipeline.md.
#include "graphs/capture/joint.h"

#include <algorithm>

#include "autograd/checkpoint.h"
#include "autograd/engine.h"
#include "autograd/node.h"
#include "graphs/capture/tracer.h"
#include "ops/random/random.h"
#include "tensor/grad_mode.h"

namespace tg::graphs {
namespace {

// The stand-in of a primal, by reference.
const Tensor& proxy_of(const PrimalRef& p, const TensorList& arg_proxies, const Tracer& tracer) {
  return p.kind == InputKind::Argument ? arg_proxies[static_cast<size_t>(p.index)]
                                       : tracer.lifted_proxies()[static_cast<size_t>(p.index)];
}

// The stand-in whose storage `t` shares, if any.
std::optional<PrimalRef> storage_owner(const Tensor& t, const TensorList& arg_proxies, const Tracer& tracer) {
  for (size_t i = 0; i < arg_proxies.size(); ++i)
    if (arg_proxies[i].impl()->storage() == t.impl()->storage()) return PrimalRef{InputKind::Argument, static_cast<int32_t>(i)};
  const TensorList& lifted = tracer.lifted_proxies();
  for (size_t i = 0; i < lifted.size(); ++i)
    if (lifted[i].impl()->storage() == t.impl()->storage()) return PrimalRef{InputKind::Lifted, static_cast<int32_t>(i)};
  return std::nullopt;
}

// Puts the random generator back where tracing found it: traced random ops reserve counters when
// they are created, but only runs draw numbers, so the first run draws what eager mode would.
class GeneratorStateGuard {
 public:
  GeneratorStateGuard() : state_(Generator::global().state()) {}
  ~GeneratorStateGuard() { Generator::global().set_state(state_); }
  GeneratorStateGuard(const GeneratorStateGuard&) = delete;
  GeneratorStateGuard& operator=(const GeneratorStateGuard&) = delete;

 private:
  PhiloxState state_;
};

// Folds the cross-process reduction of lifted leaves' gradients (data-parallel parameters) into the
// traced backward: each reducer that is reducing now gets its leaves' gradients, in the order they
// were captured (the same on every process), and its results replace them. Gradients it keeps
// elsewhere (a sharded optimizer's shard parameters) become gradients of those leaves, lifted.
void reduce_across_processes(JointGraph& joint, Tracer& tracer, TensorList& grads) {
  struct Group {
    std::shared_ptr<GradReducer> reducer;
    std::vector<std::shared_ptr<TensorImpl>> leaves;
    std::vector<size_t> slots;
  };
  std::vector<Group> groups;
  for (size_t k = 0; k < joint.grad_primals.size(); ++k) {
    const PrimalRef& p = joint.grad_primals[k];
    if (p.kind != InputKind::Lifted) continue;
    const Tensor& leaf = tracer.lifted()[static_cast<size_t>(p.index)];
    const AutogradMeta* meta = leaf.impl()->autograd_if_present();
    if (!meta || !meta->grad_reducer || meta->grad_fn) continue;
    auto group = std::find_if(groups.begin(), groups.end(), [&](const Group& g) { return g.reducer == meta->grad_reducer; });
    if (group == groups.end()) group = groups.insert(groups.end(), Group{meta->grad_reducer, {}, {}});
    group->leaves.push_back(leaf.impl_ptr());
    group->slots.push_back(k);
  }
  for (Group& group : groups) {
    if (!group.reducer->reducing()) continue;
    TensorList local;
    for (size_t k : group.slots) local.push_back(grads[k]);
    std::vector<std::pair<Tensor, Tensor>> elsewhere;
    TensorList reduced = group.reducer->reduce_elsewhere(group.leaves, local, elsewhere);
    TG_CHECK(reduced.size() == local.size(), "[compile] a gradient reducer returned ", reduced.size(),
             " gradients for ", local.size(), " leaves");
    for (size_t j = 0; j < group.slots.size(); ++j) grads[group.slots[j]] = reduced[j];
    for (const auto& [leaf, grad] : elsewhere) {
      TG_CHECK(leaf.defined() && leaf.requires_grad() && !leaf.grad_fn(),
               "[compile] a gradient reducer delivered a gradient elsewhere: expected a leaf that requires grad");
      TG_CHECK(grad.defined() && grad.sizes() == leaf.sizes(), "[compile] a gradient reducer delivered a gradient of "
               "shape ", grad.defined() ? shape_str(grad.sizes()) : "(undefined)", " to a leaf of shape ",
               shape_str(leaf.sizes()));
      tracer.lift(leaf);  // a graph input (unread) that the backward's gradient edge is taken from
      const TensorList& lifted = tracer.lifted();
      const auto index = static_cast<int32_t>(
          std::find_if(lifted.begin(), lifted.end(), [&](const Tensor& t) { return t.is_same(leaf); }) - lifted.begin());
      auto known = std::find_if(joint.grad_primals.begin(), joint.grad_primals.end(), [&](const PrimalRef& p) {
        return p.kind == InputKind::Lifted && p.index == index;
      });
      if (known != joint.grad_primals.end()) {  // the function used the leaf too: both gradients add up
        Tensor& g = grads[static_cast<size_t>(known - joint.grad_primals.begin())];
        g = g.defined() ? g + grad : grad;
        continue;
      }
      joint.grad_primals.push_back({InputKind::Lifted, index});
      grads.push_back(grad);
    }
    GradReduction folded{group.reducer, {}};
    for (const auto& leaf : group.leaves) folded.leaves.push_back(leaf);
    joint.reductions.push_back(std::move(folded));
  }
}

}  // namespace

JointGraph trace_joint(const GraphFn& fn, const TensorList& args) {
  GeneratorStateGuard generator_state;
  JointGraph joint;
  Graph& g = joint.graph;
  Tracer tracer(g);
  TensorList proxies;
  {
    OpObserverGuard observe(&tracer);
    for (size_t i = 0; i < args.size(); ++i) {
      const Tensor& a = args[i];
      TG_CHECK(a.defined(), "[compile] argument ", i, " is an undefined tensor");
      int32_t dup = -1;
      for (size_t j = 0; j < i && dup < 0; ++j)
        if (args[j].impl()->storage() == a.impl()->storage()) dup = static_cast<int32_t>(j);
      joint.duplicate_of.push_back(dup);
      if (dup < 0) {
        proxies.push_back(tracer.add_input(a, InputKind::Argument, static_cast<int32_t>(i), "arg" + std::to_string(i)));
      } else if (args[static_cast<size_t>(dup)].is_same(a)) {
        proxies.push_back(proxies[static_cast<size_t>(dup)]);  // f(a, a): one stand-in, one gradient
      } else {
        if (a.requires_grad() || args[static_cast<size_t>(dup)].requires_grad())
          throw TraceFallback("arguments " + std::to_string(dup) + " and " + std::to_string(i) +
                              " are different tensors over the same memory and require grad");
        proxies.push_back(tracer.add_aliased_input(a, proxies[static_cast<size_t>(dup)]));
      }
    }
    const bool grad_before = is_grad_enabled();
    TensorList outputs;
    try {
      CheckpointTracingGuard checkpoint_regions;  // checkpoint() marks its ops for the partitioner
      outputs = fn(proxies);
    } catch (...) {
      set_grad_enabled(grad_before);
      throw;
    }
    joint.grad_enabled_after = is_grad_enabled();
    // A captured tensor returned as it is (no op read it, or only ones that return their input, such
    // as contiguous()) is an output of its lifted input, as a returned argument is of its own.
    for (Tensor& out : outputs)
      if (tracer.is_outside(out)) out = tracer.lift(out);
    joint.lifted = tracer.lifted();
    joint.host_guards = tracer.host_guards();

    joint.num_user_outputs = outputs.size();
    for (const Tensor& out : outputs) {
      TG_CHECK(out.defined(), "[compile] the traced function returned an undefined tensor");
      g.outputs.push_back(tracer.value_of(out));
      joint.output_requires_grad.push_back(out.requires_grad());
      std::optional<OutputAlias> alias;
      if (auto owner = storage_owner(out, proxies, tracer))
        alias = OutputAlias{*owner, out.sizes(), out.strides(), out.storage_offset()};
      joint.output_aliases.push_back(alias);
    }

    // Inputs the function wrote into get their final contents as extra outputs.
    auto note_mutation = [&](const PrimalRef& p) {
      const Tensor& proxy = proxy_of(p, proxies, tracer);
      if (!tracer.was_mutated(proxy)) return;
      joint.mutated.push_back(p);
      g.outputs.push_back(tracer.value_of(proxy));  // its final contents
    };
    for (size_t i = 0; i < proxies.size(); ++i)
      if (joint.duplicate_of[i] < 0) note_mutation({InputKind::Argument, static_cast<int32_t>(i)});
    for (size_t i = 0; i < tracer.lifted_proxies().size(); ++i) note_mutation({InputKind::Lifted, static_cast<int32_t>(i)});

    // The backward: run the tape on fake tangents under the tracer.
    TensorList diff_outputs;
    for (const Tensor& out : outputs)
      if (out.requires_grad()) diff_outputs.push_back(out);
    std::vector<Edge> diff_primals;
    auto consider = [&](const PrimalRef& p) {
      const Tensor& proxy = proxy_of(p, proxies, tracer);
      if (!tracer.has_input_edge(proxy)) return;
      joint.grad_primals.push_back(p);
      diff_primals.push_back(tracer.input_edge(proxy));
    };
    for (size_t i = 0; i < proxies.size(); ++i)
      if (joint.duplicate_of[i] < 0) consider({InputKind::Argument, static_cast<int32_t>(i)});
    for (size_t i = 0; i < tracer.lifted_proxies().size(); ++i) consider({InputKind::Lifted, static_cast<int32_t>(i)});
    if (diff_outputs.empty() || diff_primals.empty()) {
      joint.grad_primals.clear();
      joint.lifted = tracer.lifted();
      return joint;
    }
    TensorList tangents;
    for (size_t i = 0; i < diff_outputs.size(); ++i) {
      const Tensor& out = diff_outputs[i];
      Tensor like(std::make_shared<TensorImpl>(out.impl()->storage(), out.sizes(), contiguous_strides(out.sizes()), 0,
                                               out.dtype()));
      tangents.push_back(tracer.add_input(like, InputKind::Tangent, static_cast<int32_t>(i), "tangent" + std::to_string(i)));
      joint.tangent_values.push_back(g.inputs.back().value);
    }
    tracer.set_phase(Phase::Backward);
    GradModeGuard grad_on(true);
    try {
      TensorList grads = grad_at_edges(diff_outputs, diff_primals, tangents, /*retain_graph=*/true,
                                       /*create_graph=*/false, /*allow_unused=*/true);
      reduce_across_processes(joint, tracer, grads);
      for (const Tensor& gr : grads) g.outputs.push_back(tracer.value_of(gr));
    } catch (const DoubleBackwardError&) {
      // The outputs are gradients computed inside the function: their backward is refused when asked for.
      joint.backward_refused = true;
    }
    // Backward formulas may capture real tensors too (a custom Function's saved constants), and
    // gradient reducers read host values (whether they reduce now).
    joint.lifted = tracer.lifted();
    joint.host_guards = tracer.host_guards();
  }
  return joint;
}

}  // namespace tg::graphs
