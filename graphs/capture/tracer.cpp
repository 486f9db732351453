// See Note [Compile pipeline] in docs/compile_pipeline.md.
#include "graphs/capture/tracer.h"

#include <algorithm>

#include "autograd/checkpoint.h"
#include "autograd/engine.h"
#include "autograd/node.h"
#include "autograd/op_node.h"
#include "graphs/capture/functional_ops.h"
#include "ops/factory/factory.h"
#include "tensor/grad_mode.h"

namespace tg::graphs {
namespace {

bool same_geometry(const Tensor& t, const TensorMeta& m) {
  return t.sizes() == m.sizes && t.strides() == m.strides && t.storage_offset() == m.offset;
}

// The history of a traced input that is not a leaf: gradients stop here (they are captured by the
// joint trace), and in-place writes to the input are legal as they are in eager mode.
class InputBoundary final : public Node {
 public:
  explicit InputBoundary(const TensorMeta& meta) { output_metas().push_back(meta); }
  TensorList apply(TensorList&&) override { return {}; }
  std::string name() const override { return "GraphInput"; }
};

// Gives a stand-in the autograd standing of the caller's tensor: a leaf, or a non-leaf.
void copy_autograd_standing(const Tensor& real, Tensor& proxy) {
  if (!real.requires_grad()) return;
  AutogradMeta& meta = proxy.impl()->autograd();
  if (real.is_leaf()) {
    meta.requires_grad = true;
  } else {
    meta.grad_fn = std::make_shared<InputBoundary>(meta_of(proxy));
    meta.output_nr = 0;
  }
}

// A data-less tensor with t's metadata over a fresh fake storage of the same size.
Tensor make_proxy(const Tensor& t) {
  const TensorImpl& i = *t.impl();
  auto storage = std::make_shared<StorageImpl>(i.device(), i.storage()->nbytes(), /*fake=*/true);
  Tensor proxy(std::make_shared<TensorImpl>(storage, i.sizes(), i.strides(), i.storage_offset(), i.dtype()));
  copy_autograd_standing(t, proxy);
  return proxy;
}

}  // namespace

Tensor Tracer::add_input(const Tensor& real, InputKind kind, int32_t index, const std::string& name) {
  Tensor proxy = make_proxy(real);
  const ValueId v = graph_.add_value(meta_of(proxy), name);
  graph_.values[static_cast<size_t>(v)].requires_grad = real.requires_grad();
  graph_.add_input(v, kind, index);
  storages_[proxy.impl()->storage().get()] = StorageState{v, meta_of(proxy), false};
  bind(proxy, v);
  if (proxy.requires_grad()) input_edges_[proxy.impl()] = gradient_edge(proxy);
  return proxy;
}

const Edge& Tracer::input_edge(const Tensor& proxy) const {
  auto it = input_edges_.find(proxy.impl());
  TG_CHECK(it != input_edges_.end(), "[trace] no gradient edge recorded for this input");
  return it->second;
}

Tensor Tracer::add_aliased_input(const Tensor& real, const Tensor& earlier_proxy) {
  const TensorImpl& i = *real.impl();
  // Views are regenerated from the earlier input in its element type: one of another dtype over the
  // same memory has no such view.
  TG_CHECK(real.dtype() == earlier_proxy.dtype(), "[compile] two inputs share memory with different dtypes (",
           dtype_name(earlier_proxy.dtype()), " and ", dtype_name(real.dtype()), "); compiled functions take "
           "inputs that alias only with the same dtype: pass a copy of one of them");
  Tensor proxy(std::make_shared<TensorImpl>(earlier_proxy.impl()->storage(), i.sizes(), i.strides(),
                                            i.storage_offset(), i.dtype()));
  copy_autograd_standing(real, proxy);
  keep_alive_.push_back(proxy);
  return proxy;
}

bool Tracer::is_constant(const Tensor& t) const {
  return t.defined() && constant_storages_.count(t.impl()->storage().get()) > 0;
}

void Tracer::bind(const Tensor& t, ValueId v) {
  const StorageImpl* s = t.impl()->storage().get();
  tensors_[t.impl()] = TensorState{v, s, s->version()};
  keep_alive_.push_back(t);
}

ValueId Tracer::new_value(const Tensor& t, std::string_view stem) {
  return graph_.add_value(meta_of(t), std::string(stem) + "_" + std::to_string(name_counter_++));
}

ValueId Tracer::value_of(const Tensor& t) {
  if (!t.defined()) return -1;
  const StorageImpl* s = t.impl()->storage().get();
  auto known = tensors_.find(t.impl());
  if (known != tensors_.end() && known->second.storage == s && known->second.version == s->version())
    return known->second.value;
  // Between an in-place kernel and its record, autograd re-views the written storage: those reads
  // see the storage's base from before the write and must not stay bound past it.
  if (std::find(pending_writes_.begin(), pending_writes_.end(), s) != pending_writes_.end()) return resolve(t);
  const ValueId v = resolve(t);
  bind(t, v);
  return v;
}

ValueId Tracer::resolve(const Tensor& t) {
  if (is_constant(t)) {
    // Constants hold real data: the current contents are snapshotted, in the same layout (later
    // ops recorded with absolute strides, such as as_strided, read the snapshot as they read t).
    const ValueId v = new_value(t, "constant");
    OpObserverGuard untraced(nullptr);
    NoGradGuard no_grad;
    Tensor snapshot = t.detach().clone();
    if (!has_internal_overlap(t.sizes(), t.strides())) {
      snapshot = empty_strided(t.sizes(), t.strides(), {.dtype = t.dtype(), .device = t.device()});
      snapshot.copy_(t);
    }
    graph_.constants[v] = snapshot;
    return v;
  }
  auto st = storages_.find(t.impl()->storage().get());
  TG_CHECK(st != storages_.end(), "[trace] an op used a tensor of shape ", shape_str(t.sizes()),
           " that is neither an input, a captured tensor, nor produced inside the traced function");
  const StorageState& state = st->second;
  if (same_geometry(t, state.base_meta) && t.dtype() == state.base_meta.dtype) return state.base;
  // A view whose base was rewritten (or a tensor re-wrapped by autograd): regenerate it from the base.
  auto op = std::make_shared<const AliasViewOp>(t.sizes(), t.strides(), t.storage_offset() - state.base_meta.offset);
  const ValueId v = new_value(t, "alias");
  add_node(op, {state.base}, {v}, -1);
  return v;
}

ValueId Tracer::value_before_write(const Tensor& t, const StorageImpl* written) {
  if (!t.defined() || t.impl()->storage().get() != written) return value_of(t);
  // The write already bumped the storage's version: a value bound just before it is current, and
  // anything else is read from the storage's base, which the write has not replaced yet. Nothing is
  // bound here, since after the write these values are stale.
  auto known = tensors_.find(t.impl());
  if (known != tensors_.end() && known->second.storage == written && known->second.version + 1 == written->version())
    return known->second.value;
  return resolve(t);
}

bool Tracer::was_mutated(const Tensor& proxy) const {
  auto st = storages_.find(proxy.impl()->storage().get());
  return st != storages_.end() && st->second.mutated;
}

bool Tracer::is_outside(const Tensor& t) const {
  // Real memory the graph already tracks (a folded constant written with traced values) is a graph
  // value, not a captured tensor.
  return t.defined() && !t.impl()->storage()->is_fake() && !is_constant(t) &&
         storages_.count(t.impl()->storage().get()) == 0;
}

Tensor Tracer::lift(const Tensor& real) {
  auto it = lifted_proxies_.find(real.impl());
  if (it == lifted_proxies_.end()) {
    const auto index = static_cast<int32_t>(lifted_.size());
    Tensor proxy = add_input(real, InputKind::Lifted, index, "lifted" + std::to_string(index));
    lifted_.push_back(real);
    lifted_proxy_list_.push_back(proxy);
    it = lifted_proxies_.emplace(real.impl(), proxy).first;
  }
  return it->second;
}

void Tracer::before_op(const OpPtr& op, TensorList& inputs) {
  for (Tensor& t : inputs)
    if (is_outside(t)) t = lift(t);  // a real tensor from outside the function (a parameter)
  // Ops nest here (autograd dispatches views while recording an in-place op), so writes stack.
  for (int target : mutated_inputs(op->schema()))
    pending_writes_.push_back(inputs[static_cast<size_t>(target)].impl()->storage().get());
}

bool Tracer::wants_fake_outputs(const OpPtr& op, const TensorList& inputs) {
  if (op->has(kRandom) || op->has(kDeviceCopy) || op->has(kHostSync) || op->has(kCollective)) return true;
  for (const Tensor& t : inputs)
    if (t.defined() && !is_constant(t)) return true;
  for (const TensorMeta& m : op->infer(inputs))
    if (!m.device.is_cpu()) return true;
  return false;  // a CPU computation on constants only: run it now and fold the result
}

int64_t Tracer::current_sequence_nr(const TensorList& outputs) const {
  // Ops run by a backward (the joint's, or one the function itself calls) belong to that node's forward op.
  const int64_t in_backward = current_backward_sequence_nr();
  if (phase_ == Phase::Backward || in_backward >= 0) return in_backward;
  for (const Tensor& t : outputs)
    if (t.defined() && t.grad_fn()) return static_cast<int64_t>(t.grad_fn()->sequence_nr());
  return -1;
}

void Tracer::record_constant_outputs(const TensorList& outputs) {
  for (const Tensor& out : outputs) {
    constant_storages_.insert(out.impl()->storage().get());
    keep_alive_.push_back(out);
  }
}

void Tracer::record_set(const TensorList& inputs) {
  // x.set_(src): x now shares src's storage, so its reads resolve through src's storage state.
  tensors_.erase(inputs[0].impl());
  value_of(inputs[0]);
}

void Tracer::record_inplace(const OpPtr& op, const TensorList& inputs, const TensorList& outputs) {
  const std::vector<int> written = mutated_inputs(op->schema());
  // Writing into no elements changes nothing (and launches nothing); aliases of the storage are
  // regenerated from its unchanged base when next read.
  bool writes_elements = op->has(kMetadataMutation);
  for (int k : written) writes_elements = writes_elements || inputs[static_cast<size_t>(k)].numel() > 0;
  if (!writes_elements) return;
  // Every operand is read as it was before the write, also one that aliases a target.
  std::vector<const StorageImpl*> targets;
  for (int k : written) targets.push_back(inputs[static_cast<size_t>(k)].impl()->storage().get());
  std::vector<ValueId> ins;
  ins.reserve(inputs.size());
  for (const Tensor& t : inputs) {
    const bool written_here =
        t.defined() && std::find(targets.begin(), targets.end(), t.impl()->storage().get()) != targets.end();
    ins.push_back(written_here ? value_before_write(t, t.impl()->storage().get()) : value_of(t));
  }
  auto fop = std::make_shared<const FunctionalizedOp>(op);
  const std::vector<TensorMeta> metas = fop->infer(inputs);
  std::vector<ValueId> results;
  for (size_t j = 0; j < written.size(); ++j) {
    const ValueId nv = new_value(inputs[static_cast<size_t>(written[j])], fop->name());
    graph_.values[static_cast<size_t>(nv)].meta = metas[j];
    results.push_back(nv);
  }
  add_node(fop, ins, results, current_sequence_nr(outputs));
  for (size_t j = 0; j < written.size(); ++j) {
    const Tensor& target = inputs[static_cast<size_t>(written[j])];
    if (target.numel() > 0 || op->has(kMetadataMutation)) commit_write(*op, target, results[j], outputs);
  }
}

void Tracer::commit_write(const Op& op, const Tensor& target, ValueId nv, const TensorList& outputs) {
  const StorageImpl* s = target.impl()->storage().get();
  auto st = storages_.find(s);
  if (st == storages_.end()) {
    // Writing into a constant with non-constant operands: the storage now lives in the graph.
    constant_storages_.erase(s);
    st = storages_.emplace(s, StorageState{nv, meta_of(target), false}).first;
  }
  StorageState& state = st->second;
  const bool metadata = op.has(kMetadataMutation);
  if (metadata || (same_geometry(target, state.base_meta) && target.dtype() == state.base_meta.dtype)) {
    TG_CHECK(metadata || dense_strides_like(meta_of(target)) == target.strides(), "[", op.name(),
             "] in-place write to a tensor with non-dense strides ",
             shape_str(target.strides()), " inside a compiled function is not supported; clone() it first");
    state.base = nv;
    state.base_meta = meta_of(target);
  } else {
    auto scatter = std::make_shared<const ViewScatterOp>(target.sizes(), target.strides(),
                                                         target.storage_offset() - state.base_meta.offset);
    const ValueId nb = graph_.add_value(state.base_meta, "scatter_" + std::to_string(name_counter_++));
    graph_.values[static_cast<size_t>(nb)].meta.strides = dense_strides_like(state.base_meta);
    graph_.values[static_cast<size_t>(nb)].meta.offset = 0;
    add_node(scatter, {state.base, nv}, {nb}, current_sequence_nr(outputs));
    state.base = nb;
    state.mutated = true;
    // The view now reads through the new base (so it keeps aliasing it), regenerated on next use.
    tensors_.erase(target.impl());
    return;
  }
  state.mutated = true;
  bind(target, nv);
}

void Tracer::add_node(OpPtr op, std::vector<ValueId> ins, std::vector<ValueId> outs, int64_t sequence_nr) {
  const int32_t index = graph_.add_node(std::move(op), std::move(ins), std::move(outs), phase_, sequence_nr);
  if (phase_ == Phase::Forward) graph_.nodes[static_cast<size_t>(index)].checkpoint_region = current_checkpoint_region();
}

void Tracer::on_op(const OpPtr& op, const TensorList& inputs, const TensorList& outputs) {
  if (op->schema().mutates >= 0) {
    const size_t written = 1 + op->schema().also_mutates.size();
    pending_writes_.resize(pending_writes_.size() > written ? pending_writes_.size() - written : 0);
  }
  bool all_constant = true;
  for (const Tensor& t : inputs)
    if (t.defined() && !is_constant(t)) all_constant = false;
  const bool ran_for_real = !outputs.empty() && !outputs[0].impl()->storage()->is_fake();
  if (all_constant && ran_for_real) {
    // Folded: the data is real; values are snapshotted when a non-constant op reads them.
    if (op->schema().mutates < 0) record_constant_outputs(outputs);
    return;
  }
  if (op->name() == "set_") {
    record_set(inputs);
    return;
  }
  if (op->schema().mutates >= 0) {
    record_inplace(op, inputs, outputs);
    return;
  }
  std::vector<ValueId> ins;
  ins.reserve(inputs.size());
  for (const Tensor& t : inputs) ins.push_back(value_of(t));
  std::vector<ValueId> outs;
  outs.reserve(outputs.size());
  for (const Tensor& out : outputs) {
    const ValueId v = new_value(out, op->name());
    graph_.values[static_cast<size_t>(v)].requires_grad = out.requires_grad();
    outs.push_back(v);
  }
  add_node(op, ins, outs, current_sequence_nr(outputs));
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Tensor& out = outputs[i];
    if (!op->has(kView)) {
      storages_[out.impl()->storage().get()] = StorageState{outs[i], meta_of(out), false};
    } else if (op->has(kStreamWait)) {
      // After a stream wait (collective_wait) the storage's base is the waited value: an alias of it
      // regenerated later (a re-wrapped tensor, a parameter pointed at it) reads after the wait too.
      auto st = storages_.find(out.impl()->storage().get());
      if (st != storages_.end() && same_geometry(out, st->second.base_meta)) st->second.base = outs[i];
    }
    bind(out, outs[i]);
  }
}

}  // namespace tg::graphs
