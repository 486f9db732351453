#include "autograd/function.h"

#include <cxxabi.h>

#include <cstdlib>

#include "autograd/engine.h"
#include "autograd/op_node.h"
#include "autograd/view_rebase.h"
#include "ops/core/dispatch.h"
#include "ops/factory/factory.h"
#include "ops/reduce/reduce.h"
#include "ops/shape/view.h"

namespace tg {
namespace {

bool contains(const std::unordered_set<const TensorImpl*>& set, const Tensor& t) {
  return t.defined() && set.count(t.impl()) != 0;
}

bool is_one_of(const Tensor& t, const TensorList& list) {
  for (const Tensor& x : list)
    if (x.defined() && x.is_same(t)) return true;
  return false;
}

// True when a tensor of `sizes` broadcasts to `target` (so a gradient of `target`'s shape can be summed down).
bool is_expandable_to(const Shape& sizes, const Shape& target) {
  if (sizes.size() > target.size()) return false;
  const size_t lead = target.size() - sizes.size();
  for (size_t i = 0; i < sizes.size(); ++i)
    if (sizes[i] != target[lead + i] && sizes[i] != 1) return false;
  return true;
}

// A new tensor object sharing x's data (a view of x's base) with no autograd history. It goes through
// dispatch like any view op so that graph tracing sees the aliasing.
Tensor alias_of(const Tensor& x) {
  GradModeGuard no_grad(false);
  return as_strided(x, x.sizes(), x.strides(), x.storage_offset());
}

void set_history(const Tensor& t, const std::shared_ptr<Node>& node, uint32_t output_nr) {
  AutogradMeta& meta = t.impl()->autograd();
  meta.grad_fn = node;
  meta.output_nr = output_nr;
  // An output aliasing an input is a view whose history is this node as of now (see gradient_edge).
  meta.view_version = t.impl()->storage()->version();
}

// Rejects an in-place forward on a tensor whose history cannot be rewritten.
void check_dirty_target(const std::string& fn, const Tensor& t, size_t num_outputs) {
  TG_CHECK(!(t.is_leaf() && t.requires_grad()), "[", fn,
           "] a leaf Variable that requires grad has been used in an in-place operation (mark_dirty). "
           "clone() the input before calling the Function.");
  const auto& base = t.impl()->view_base();
  if (!base) return;
  TG_CHECK(!(Tensor(base).is_leaf() && Tensor(base).requires_grad()), "[", fn,
           "] a view of a leaf Variable that requires grad has been used in an in-place operation (mark_dirty).");
  TG_CHECK(num_outputs == 1, "[", fn,
           "] a Function that modifies in place an input that is a view of another Tensor cannot return more "
           "than one Tensor (it returns ", num_outputs, "). clone() the input first, or split the Function in two.");
}

}  // namespace

void AutogradContext::save_for_backward(TensorList to_save) { to_save_ = std::move(to_save); }

TensorList AutogradContext::get_saved_variables() const {
  if (!packed_) return to_save_;  // still inside forward, or no graph was recorded
  std::shared_ptr<CustomNodeBase> node = node_.lock();
  TensorList out;
  out.reserve(saved_.size());
  for (const SavedTensor& s : saved_) out.push_back(s.unpack(node, "saved by save_for_backward"));
  return out;
}

void AutogradContext::mark_dirty(const TensorList& inputs) {
  for (const Tensor& t : inputs)
    if (t.defined()) dirty_.insert(t.impl());
}

void AutogradContext::mark_non_differentiable(const TensorList& outputs) {
  for (const Tensor& t : outputs)
    if (t.defined()) non_differentiable_.insert(t.impl());
}

bool AutogradContext::needs_input_grad(size_t index) const {
  TG_CHECK(index < needs_input_grad_.size(), "[custom Function] needs_input_grad(", index, ") but forward has ",
           needs_input_grad_.size(), " tensor inputs");
  if (std::shared_ptr<CustomNodeBase> node = node_.lock(); node && !node->next_edges().empty())
    return node->next_edges()[index].valid();
  return needs_input_grad_[index];
}

std::string FunctionCall::node_name(const char* mangled) {
  int status = 0;
  char* demangled = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
  std::string name = status == 0 && demangled ? demangled : mangled;
  std::free(demangled);
  // Keep the unqualified class name: "ns::Outer::MyFn" -> "MyFn".
  size_t depth = 0;
  size_t start = 0;
  for (size_t i = 0; i < name.size(); ++i) {
    if (name[i] == '<') ++depth;
    if (name[i] == '>' && depth > 0) --depth;
    if (depth == 0 && name[i] == ':' && i + 1 < name.size() && name[i + 1] == ':') start = i + 2;
  }
  return name.substr(start) + "Backward";
}

void FunctionCall::begin(AutogradContext& ctx, const std::shared_ptr<CustomNodeBase>& node, const TensorList& inputs) {
  ctx.node_ = node;
  bool any = false;
  ctx.needs_input_grad_.clear();
  for (const Tensor& t : inputs) {
    const bool needs = is_grad_enabled() && t.defined() && t.requires_grad();
    ctx.needs_input_grad_.push_back(needs);
    any = any || needs;
  }
  if (!any) return;
  // Like an op recorded while a backward is traced: differentiating through it again is double backward.
  if (current_op_observer() != nullptr && current_backward_sequence_nr() >= 0) node->mark_traced_double_backward();
  auto& edges = node->mutable_next_edges();
  for (const Tensor& t : inputs) {
    edges.push_back(t.defined() && t.requires_grad() ? gradient_edge(t) : Edge{});
    node->input_metas_.push_back(t.defined() ? meta_of(t) : TensorMeta{});
  }
}

TensorList FunctionCall::finish(AutogradContext& ctx, const std::shared_ptr<CustomNodeBase>& node,
                                const TensorList& inputs, TensorList outputs) {
  const std::string& fn = node->name();
  const bool executable = !node->next_edges().empty();
  for (const TensorImpl* d : ctx.dirty_) {
    bool is_input = false, returned = false;
    for (const Tensor& t : inputs) is_input = is_input || (t.defined() && t.impl() == d);
    for (const Tensor& t : outputs) returned = returned || (t.defined() && t.impl() == d);
    TG_CHECK(is_input, "[", fn, "] mark_dirty() was given a tensor that is not an input of forward; only inputs "
             "modified in place need marking");
    TG_CHECK(returned, "[", fn, "] some tensors marked as dirty during forward were not returned as outputs");
  }

  for (size_t i = 0; i < outputs.size(); ++i) {
    Tensor& out = outputs[i];
    node->output_defined_.push_back(out.defined());
    if (!out.defined()) {
      if (executable) node->output_metas().emplace_back();
      continue;
    }
    const bool is_input = is_one_of(out, inputs);
    const bool is_modified = contains(ctx.dirty_, out);
    const bool differentiable =
        executable && !contains(ctx.non_differentiable_, out) && is_floating(out.dtype());
    const auto output_nr = static_cast<uint32_t>(i);
    if (!differentiable) {
      if (!out.requires_grad()) {
        if (is_input && !is_modified) out = alias_of(out);
      } else if (is_input) {
        out = out.detach();
      } else if (!out.impl()->view_base()) {
        out.detach_();
      }
    } else if (is_modified) {
      check_dirty_target(fn, out, outputs.size());
      if (out.impl()->view_base()) {
        size_t input_index = 0;
        while (!inputs[input_index].defined() || !inputs[input_index].is_same(out)) ++input_index;
        rebase_history(out, node, static_cast<int>(input_index));
      } else {
        set_history(out, node, output_nr);
      }
    } else if (is_input) {
      out = alias_of(out);
      set_history(out, node, output_nr);
    } else {
      set_history(out, node, output_nr);
    }
    if (executable) node->output_metas().push_back(meta_of(out));
  }

  if (executable) {
    ctx.saved_.reserve(ctx.to_save_.size());
    for (const Tensor& t : ctx.to_save_) ctx.saved_.emplace_back(t, t.defined() && is_one_of(t, outputs));
    ctx.to_save_.clear();
    ctx.packed_ = true;
  }
  return outputs;
}

TensorList CustomNodeBase::apply(TensorList&& grad_outputs) {
  for (size_t i = 0; i < grad_outputs.size() && i < output_defined_.size(); ++i) {
    if (grad_outputs[i].defined() || !ctx_.materialize_grads_ || !output_defined_[i]) continue;
    const TensorMeta& m = output_metas()[i];
    grad_outputs[i] = zeros(m.sizes, {.dtype = m.dtype, .device = m.device});
  }
  TensorList grads = call_backward(&ctx_, std::move(grad_outputs));
  TG_CHECK(grads.size() == input_metas_.size(), "function ", name_,
           " returned an incorrect number of gradients (expected ", input_metas_.size(), ", got ", grads.size(),
           "): backward must return one gradient per tensor input of forward (undefined for none)");
  for (size_t i = 0; i < grads.size(); ++i) {
    Tensor& g = grads[i];
    if (!g.defined()) continue;
    if (!next_edges()[i].valid()) {
      g = Tensor();  // the input needs no gradient
      continue;
    }
    const TensorMeta& m = input_metas_[i];
    if (g.sizes() != m.sizes) {
      TG_CHECK(is_expandable_to(m.sizes, g.sizes()), "Function ", name_, " returned an invalid gradient at index ",
               i, " - got ", shape_str(g.sizes()), " but expected shape compatible with ", shape_str(m.sizes));
      g = sum_to(g, m.sizes);
    }
    TG_CHECK(g.device() == m.device, "Function ", name_, " returned an invalid gradient at index ", i,
             " - expected device ", m.device.str(), " but got ", g.device().str());
    if (g.dtype() != m.dtype) g = g.to(m.dtype);
  }
  return grads;
}

void CustomNodeBase::release_saved() {
  for (SavedTensor& s : ctx_.saved_) s.release();
}

}  // namespace tg
