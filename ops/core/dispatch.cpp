#include "ops/core/dispatch.h"

#include <algorithm>

#include "ops/core/profile_hooks.h"
#include "ops/core/tape.h"
#include "tensor/grad_mode.h"
#include "tensor/memory/cpu_allocator.h"

namespace tg {
namespace {

thread_local OpObserver* t_observer = nullptr;

bool holds_no_data(const TensorList& inputs, const TensorMeta& meta) {
  if (meta.device.is_meta()) return true;
  for (const Tensor& t : inputs)
    if (t.impl()->storage()->is_fake()) return true;
  return false;
}

// Rejects in-place writes that autograd or memory layout cannot honour.
void check_inplace_target(const Op& op, const Tensor& target, bool recording) {
  if (recording && target.requires_grad()) {
    TG_CHECK(!target.is_leaf(), "[", op.name(), "] a leaf Variable that requires grad is being used in an in-place "
             "operation. Wrap the update in tg::NoGradGuard, or clone() the tensor first.");
    const auto& base = target.impl()->view_base();
    TG_CHECK(!base || !Tensor(base).is_leaf() || !Tensor(base).requires_grad(), "[", op.name(),
             "] a view of a leaf Variable that requires grad is being used in an in-place operation.");
  }
  if (!op.has(kMetadataMutation)) {
    TG_CHECK(!has_internal_overlap(target.sizes(), target.strides()), "[", op.name(),
             "] unsupported operation: more than one element of the written-to tensor refers to a single memory "
             "location. Please clone() the tensor before performing the operation.");
  }
}

bool any_requires_grad(const TensorList& inputs) {
  for (const Tensor& t : inputs)
    if (t.defined() && t.requires_grad()) return true;
  return false;
}

// Creates the outputs described by `metas`: the mutated input, views of an input, or fresh storage.
TensorList make_outputs(const Op& op, const TensorList& inputs, std::vector<TensorMeta>& metas, bool force_fake) {
  const OpSchema& s = op.schema();
  TensorList outputs;
  outputs.reserve(metas.size());
  if (s.mutates >= 0) {
    outputs.push_back(inputs[static_cast<size_t>(s.mutates)]);
    for (int k : s.also_mutates) outputs.push_back(inputs[static_cast<size_t>(k)]);
    return outputs;
  }
  const bool fake = force_fake || (!metas.empty() && holds_no_data(inputs, metas[0]));
  for (TensorMeta& m : metas) {
    if (s.view_of >= 0) {
      const Tensor& base = inputs[static_cast<size_t>(s.view_of)];
      auto impl = make_shared_small<TensorImpl>(base.impl()->storage(), std::move(m.sizes), std::move(m.strides),
                                                m.offset, m.dtype);
      const auto& root = base.impl()->view_base();
      impl->set_view_base(root ? root : base.impl_ptr());
      outputs.emplace_back(std::move(impl));
      continue;
    }
    Shape strides = m.strides.empty() && !m.sizes.empty() ? contiguous_strides(m.sizes) : std::move(m.strides);
    const int64_t nbytes = storage_span(m.sizes, strides) * dtype_size(m.dtype);
    auto storage = make_shared_small<StorageImpl>(m.device, nbytes, fake);
    outputs.emplace_back(
        make_shared_small<TensorImpl>(std::move(storage), std::move(m.sizes), std::move(strides), 0, m.dtype));
  }
  return outputs;
}

bool should_run_kernel(const Op& op, const TensorList& inputs, const TensorList& outputs) {
  if (op.has(kView) && !op.has(kStreamWait)) return false;  // a stream wait writes nothing but orders work
  // Metadata mutations (resize_, set_) must change geometry even on fake tensors; their eval
  // touches no data when the storage is fake.
  if (op.has(kMetadataMutation)) return true;
  for (const Tensor& t : outputs)
    if (t.impl()->storage()->is_fake()) return false;
  for (const Tensor& t : inputs)
    if (t.defined() && t.impl()->storage()->is_fake()) return false;
  for (const Tensor& t : outputs)
    if (t.numel() > 0) return true;
  return false;  // zero-element outputs launch nothing
}

// Every written input's storage moves to a new version (the outputs of an in-place op are its targets).
void bump_written_versions(const OpSchema& s, const TensorList& outputs) {
  if (s.mutates < 0) return;
  for (const Tensor& t : outputs) t.impl()->storage()->bump_version();
}

// A multi-tensor update writes tensors that autograd cannot follow, each in its own memory.
void check_multi_write(const Op& op, const TensorList& inputs) {
  const OpSchema& s = op.schema();
  TG_CHECK(op.has(kNonDifferentiable), "[", op.name(), "] an op writing several inputs must be non-differentiable");
  std::vector<const StorageImpl*> seen;
  for (int k : mutated_inputs(s)) {
    const Tensor& t = inputs[static_cast<size_t>(k)];
    TG_CHECK(!is_grad_enabled() || !t.requires_grad(), "[", op.name(), "] input ", k,
             " requires grad and would be written in place; run the update under tg::NoGradGuard");
    check_inplace_target(op, t, false);
    const StorageImpl* st = t.impl()->storage().get();
    TG_CHECK(std::find(seen.begin(), seen.end(), st) == seen.end(), "[", op.name(), "] input ", k,
             " shares memory with another tensor the op writes; each written tensor needs its own storage");
    seen.push_back(st);
  }
}

// The outputs' metadata; for ops writing an input (whose output is that input) only the checks.
std::vector<TensorMeta> infer_outputs(const Op& op, const TensorList& inputs) {
  if (op.schema().mutates >= 0) {
    op.validate_in_place(inputs);
    return {};
  }
  return op.infer(inputs);
}

}  // namespace

std::vector<int> mutated_inputs(const OpSchema& s) {
  std::vector<int> out;
  if (s.mutates < 0) return out;
  out.reserve(1 + s.also_mutates.size());
  out.push_back(s.mutates);
  out.insert(out.end(), s.also_mutates.begin(), s.also_mutates.end());
  return out;
}

TensorList run_kernel(const Op& op, const TensorList& inputs, bool fake) {
  OpRange range(op, inputs);
  std::vector<TensorMeta> metas = infer_outputs(op, inputs);
  TensorList outputs = make_outputs(op, inputs, metas, fake);
  if (should_run_kernel(op, inputs, outputs)) op.eval(inputs, outputs);
  bump_written_versions(op.schema(), outputs);
  return outputs;
}

TensorList dispatch(const OpPtr& op, TensorList inputs) {
  OpRange range(*op, inputs);
  const OpSchema& s = op->schema();
  OpObserver* const obs = t_observer;
  if (obs) obs->before_op(op, inputs);
  std::vector<TensorMeta> metas = infer_outputs(*op, inputs);
  const bool recording = is_grad_enabled() && !op->has(kNonDifferentiable) && any_requires_grad(inputs);
  Tensor original_target;  // for in-place ops recorded on the tape: the value before the write
  if (!s.also_mutates.empty()) check_multi_write(*op, inputs);
  if (s.mutates >= 0) {
    const Tensor& target = inputs[static_cast<size_t>(s.mutates)];
    check_inplace_target(*op, target, recording);
    // Not detached: the saved pre-write value keeps its history so double backward reaches it.
    if (recording && op->saves().inputs) original_target = target.clone();
  }

  // The node and its saved inputs are made before the kernel runs: a saved input records the version
  // and history it has now, so an input that the op itself overwrites (x.mul_(x)) is caught as
  // modified at backward instead of being read after the write, and holds no link back to this node.
  std::shared_ptr<Node> node;
  if (recording) node = tape::begin_node(op, inputs, original_target);

  TensorList outputs = make_outputs(*op, inputs, metas, obs && obs->wants_fake_outputs(op, inputs));
  if (should_run_kernel(*op, inputs, outputs)) {
    GradModeGuard no_grad(false);
    OpObserverGuard no_observer(nullptr);
    op->eval(inputs, outputs);
  }
  bump_written_versions(s, outputs);

  if (recording) tape::finish_node(node, *op, outputs, obs != nullptr);
  if (obs) obs->on_op(op, inputs, outputs);
  return outputs;
}

Tensor dispatch1(const OpPtr& op, TensorList inputs) { return std::move(dispatch(op, std::move(inputs))[0]); }

OpObserver* current_op_observer() { return t_observer; }

OpObserverGuard::OpObserverGuard(OpObserver* observer) : previous_(t_observer) { t_observer = observer; }
OpObserverGuard::~OpObserverGuard() { t_observer = previous_; }

Device common_device(const char* op, const TensorList& inputs) {
  std::optional<Device> dev;
  for (const Tensor& t : inputs) {
    if (!t.defined()) continue;
    const Device d = t.device();
    if (d.is_cpu() && t.dim() == 0) {
      continue;
    }
    if (!dev) {
      dev = d;
    } else {
      TG_CHECK(*dev == d, "[", op, "] expected all tensors to be on the same device, but found at least two "
               "devices, ", dev->str(), " and ", d.str(), "!");
    }
  }
  if (dev) return *dev;
  return kCPU;
}

void check_floating(const char* op, const Tensor& t) {
  TG_CHECK(is_floating(t.dtype()), "[", op, "] expected a floating point tensor, got ",
           dtype_name(t.dtype()));
}

TensorMeta contiguous_meta(Shape sizes, DType dtype, Device device) {
  TensorMeta m;
  m.strides = contiguous_strides(sizes);
  m.sizes = std::move(sizes);
  m.dtype = dtype;
  m.device = device;
  return m;
}

TensorMeta meta_of(const Tensor& t) {
  const TensorImpl& i = *t.impl();
  return TensorMeta{i.sizes(), i.strides(), i.storage_offset(), i.dtype(), i.device()};
}

}  // namespace tg
