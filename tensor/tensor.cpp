// Tensor methods that concern identity, host access and autograd state; op methods live in ops/.
#include "tensor/tensor.h"

#include "autograd/engine.h"
#include "autograd/node.h"
#include "autograd/op_node.h"
#include "ops/elementwise/copy.h"
#include "tensor/grad_mode.h"

namespace tg {

int64_t Tensor::size(int64_t d) const { return sizes()[static_cast<size_t>(wrap_dim(d, dim(), "size"))]; }

int64_t Tensor::stride(int64_t d) const { return strides()[static_cast<size_t>(wrap_dim(d, dim(), "stride"))]; }

void* Tensor::raw_data() const {
  TensorImpl* i = checked();
  if (i->storage()->is_fake()) [[unlikely]] {
    throw DataDependentError(detail::concat(
        "[data_ptr] Cannot access data pointer of a ", device().is_meta() ? "meta" : "fake",
        " tensor: it has sizes and dtype but no values (a data-dependent read, such as item(), during tracing)"));
  }
  return i->data();
}

template <typename T>
T* Tensor::data_ptr() const {
  TG_CHECK(dtype() == dtype_of<T>(), "[data_ptr] expected a tensor of dtype ", dtype_name(dtype_of<T>()),
           ", got ", dtype_name(dtype()));
  return static_cast<T*>(raw_data());
}

template <typename T>
std::vector<T> Tensor::to_vector() const {
  Tensor host = to(kCPU, dtype_of<T>()).contiguous();
  const T* p = host.data_ptr<T>();
  return std::vector<T>(p, p + host.numel());
}

template <typename T>
T Tensor::item() const {
  TG_CHECK(numel() == 1, "[item] a Tensor with ", numel(), " elements cannot be converted to a scalar");
  if (checked()->storage()->is_fake()) [[unlikely]] {
    // Named here, before a trace records the copy to the host that item() starts with.
    throw DataDependentError(detail::concat(
        "[item] Cannot access data pointer of a ", device().is_meta() ? "meta" : "fake",
        " tensor: item() reads a value on the host that tracing does not have (a data-dependent read)"));
  }
  return to_vector<T>()[0];
}

#define TG_INSTANTIATE_ACCESS(T)                     \
  template T* Tensor::data_ptr<T>() const;           \
  template std::vector<T> Tensor::to_vector<T>() const; \
  template T Tensor::item<T>() const;
TG_INSTANTIATE_ACCESS(bool)
TG_INSTANTIATE_ACCESS(int32_t)
TG_INSTANTIATE_ACCESS(int64_t)
TG_INSTANTIATE_ACCESS(float)
TG_INSTANTIATE_ACCESS(double)
TG_INSTANTIATE_ACCESS(Half)
TG_INSTANTIATE_ACCESS(BFloat16)
#undef TG_INSTANTIATE_ACCESS

bool Tensor::requires_grad() const {
  const AutogradMeta* m = checked()->autograd_if_present();
  return m && (m->requires_grad || m->grad_fn);
}

Tensor& Tensor::requires_grad_(bool value) {
  TG_CHECK(is_leaf() || value, "[requires_grad_] you can only change requires_grad flags of leaf variables. If you "
           "want to use a computed variable in a subgraph that doesn't require differentiation use detach().");
  TG_CHECK(!value || is_floating(dtype()), "[requires_grad_] only Tensors of floating point dtype can require "
           "gradients, got ", dtype_name(dtype()));
  TensorImpl* impl = checked();
  // A leaf view that starts requiring grad becomes its own autograd root: a write through a view of it
  // is then checked against it, and no history is ever grafted onto the tensor it was cut from.
  if (value && is_leaf()) impl->set_view_base(nullptr);
  impl->autograd().requires_grad = value;
  return *this;
}

Tensor Tensor::grad() const {
  const AutogradMeta* m = checked()->autograd_if_present();
  return m && m->grad ? Tensor(m->grad) : Tensor();
}

void Tensor::set_grad(const Tensor& g) const {
  if (g.defined()) {
    TG_CHECK(g.sizes() == sizes(), "[grad] assigned grad has shape ", shape_str(g.sizes()),
             " but the tensor has shape ", shape_str(sizes()));
  }
  checked()->autograd().grad = g.impl_ptr();
}

bool Tensor::is_leaf() const {
  const AutogradMeta* m = checked()->autograd_if_present();
  return !m || !m->grad_fn;
}

const std::shared_ptr<Node>& Tensor::grad_fn() const {
  static const std::shared_ptr<Node> none;
  const AutogradMeta* m = checked()->autograd_if_present();
  return m ? m->grad_fn : none;
}

uint32_t Tensor::output_nr() const {
  const AutogradMeta* m = checked()->autograd_if_present();
  return m ? m->output_nr : 0;
}

void Tensor::backward(const Tensor& grad, bool retain_graph, bool create_graph) const {
  tg::backward({*this}, grad.defined() ? TensorList{grad} : TensorList{}, retain_graph, create_graph);
}

Tensor Tensor::detach() const {
  const TensorImpl& i = *checked();
  return Tensor(std::make_shared<TensorImpl>(i.storage(), i.sizes(), i.strides(), i.storage_offset(), i.dtype()));
}

Tensor& Tensor::detach_() {
  if (AutogradMeta* m = checked()->autograd_if_present()) {
    m->grad_fn.reset();
    m->requires_grad = false;
    m->output_nr = 0;
  }
  return *this;
}

void Tensor::retain_grad() const {
  TG_CHECK(requires_grad(), "[retain_grad] can't retain_grad on Tensor that has requires_grad=false");
  if (is_leaf()) return;  // leaves keep their grad anyway
  AutogradMeta& m = checked()->autograd();
  if (m.retains_grad) return;
  m.retains_grad = true;
  std::weak_ptr<TensorImpl> weak = impl_;
  m.grad_fn->add_retain_grad_hook(m.output_nr, [weak](const Tensor& g) {
    if (auto self = weak.lock()) {
      AutogradMeta& meta = self->autograd();
      meta.grad = meta.grad ? (Tensor(meta.grad) + g).impl_ptr() : g.detach().clone().impl_ptr();
    }
    return Tensor();
  });
}

size_t Tensor::register_hook(GradHook hook) const {
  TG_CHECK(requires_grad(), "[register_hook] cannot register a hook on a tensor that doesn't require gradient");
  AutogradMeta& m = checked()->autograd();
  if (m.grad_fn) {
    m.grad_fn->add_pre_hook(m.output_nr, std::move(hook));
    return m.grad_fn->pre_hooks().at(m.output_nr).size() - 1;
  }
  m.hooks.push_back(std::move(hook));
  return m.hooks.size() - 1;
}

size_t Tensor::register_post_accumulate_grad_hook(PostAccumulateGradHook hook) const {
  TG_CHECK(requires_grad(), "[register_post_accumulate_grad_hook] cannot register a hook on a tensor that doesn't "
           "require gradient");
  AutogradMeta& m = checked()->autograd();
  TG_CHECK(!m.grad_fn, "[register_post_accumulate_grad_hook] post accumulate grad hooks can only be registered on "
           "leaf tensors, got a tensor produced by ", m.grad_fn->name());
  m.post_accumulate_hooks.push_back(std::move(hook));
  return m.post_accumulate_hooks.size() - 1;
}

}  // namespace tg
