#include "nn/module.h"

#include "autograd/zero_grad.h"
#include "tensor/check.h"
#include "tensor/grad_mode.h"

namespace tg::nn {

void move_in_place(Tensor& t, Device device) {
  if (!t.defined() || t.device() == device) return;
  NoGradGuard no_grad;
  Tensor moved = t.detach().to(device);
  TensorImpl* impl = t.impl();
  impl->set_geometry(moved.impl()->storage(), moved.sizes(), moved.strides(), moved.storage_offset());
}

namespace {

// Converts a floating tensor to `dtype` in place (the handle keeps its identity); others stay.
void convert_in_place(Tensor& t, DType dtype) {
  if (!t.defined() || !t.is_floating_point() || t.dtype() == dtype) return;
  NoGradGuard no_grad;
  Tensor converted = t.detach().to(dtype);
  t.impl()->set_typed_geometry(dtype, converted.impl()->storage(), converted.sizes(), converted.strides(),
                               converted.storage_offset());
}

}  // namespace

void Module::check_new_name(const std::string& name) const {
  TG_CHECK(!name.empty(), "[Module] ", type_name(), ": a parameter, buffer or module name cannot be empty");
  TG_CHECK(name.find('.') == std::string::npos, "[Module] ", type_name(), ": name \"", name,
           "\" must not contain \".\" (dots separate the levels of named_parameters())");
  auto taken = [&](const auto& list) {
    for (const auto& [n, _] : list)
      if (n == name) return true;
    return false;
  };
  TG_CHECK(!taken(params_) && !taken(buffers_) && !taken(children_), "[Module] ", type_name(),
           ": attribute \"", name, "\" is already registered");
}

Tensor Module::register_parameter(const std::string& name, Tensor tensor, bool requires_grad) {
  check_new_name(name);
  TG_CHECK(tensor.defined(), "[Module] ", type_name(), ": parameter \"", name, "\" is an undefined tensor");
  if (!tensor.is_leaf()) tensor = tensor.detach();
  if (requires_grad) {
    TG_CHECK(tensor.is_floating_point(), "[Module] ", type_name(), ": parameter \"", name,
             "\" must have a floating dtype to require grad, got ", dtype_name(tensor.dtype()));
  }
  tensor.requires_grad_(requires_grad);
  params_.emplace_back(name, std::move(tensor));
  return params_.back().second;
}

Tensor Module::register_buffer(const std::string& name, Tensor tensor) {
  check_new_name(name);
  TG_CHECK(tensor.defined(), "[Module] ", type_name(), ": buffer \"", name, "\" is an undefined tensor");
  buffers_.emplace_back(name, tensor.detach());
  return buffers_.back().second;
}

Tensor Module::operator()(const Tensor& input) {
  if (forward_pre_hooks_.empty() && forward_hooks_.empty()) return forward(input);
  return call([&] { return forward(input); });
}

Tensor Module::call(const std::function<Tensor()>& body) {
  for (const ForwardPreHook& hook : forward_pre_hooks_) hook(*this);
  Tensor out = body();
  for (const ForwardHook& hook : forward_hooks_) hook(*this, out);
  return out;
}

void Module::register_forward_pre_hook(ForwardPreHook hook) {
  TG_CHECK(hook != nullptr, "[Module] ", type_name(), ": register_forward_pre_hook got an empty hook");
  forward_pre_hooks_.push_back(std::move(hook));
}

void Module::register_forward_hook(ForwardHook hook) {
  TG_CHECK(hook != nullptr, "[Module] ", type_name(), ": register_forward_hook got an empty hook");
  forward_hooks_.push_back(std::move(hook));
}

void Module::add_child(const std::string& name, std::shared_ptr<Module> module) {
  check_new_name(name);
  TG_CHECK(module != nullptr, "[Module] ", type_name(), ": submodule \"", name, "\" is null");
  TG_CHECK(module.get() != this, "[Module] ", type_name(), ": a module cannot be its own child");
  children_.emplace_back(name, std::move(module));
}

void Module::collect(const std::string& prefix, bool recurse, bool buffers, std::vector<NamedTensor>& out) const {
  for (const auto& [name, t] : buffers ? buffers_ : params_) out.emplace_back(prefix + name, t);
  if (!recurse) return;
  for (const auto& [name, child] : children_) child->collect(prefix + name + ".", true, buffers, out);
}

std::vector<NamedTensor> Module::named_parameters(bool recurse) const {
  std::vector<NamedTensor> out;
  collect("", recurse, false, out);
  return out;
}

std::vector<NamedTensor> Module::named_buffers(bool recurse) const {
  std::vector<NamedTensor> out;
  collect("", recurse, true, out);
  return out;
}

TensorList Module::parameters(bool recurse) const {
  TensorList out;
  for (auto& [_, t] : named_parameters(recurse)) out.push_back(t);
  return out;
}

TensorList Module::buffers(bool recurse) const {
  TensorList out;
  for (auto& [_, t] : named_buffers(recurse)) out.push_back(t);
  return out;
}

void Module::collect_modules(const std::string& prefix, std::vector<std::pair<std::string, Module*>>& out) {
  out.emplace_back(prefix, this);
  for (const auto& [name, child] : children_) child->collect_modules(prefix.empty() ? name : prefix + "." + name, out);
}

std::vector<std::pair<std::string, Module*>> Module::named_modules() {
  std::vector<std::pair<std::string, Module*>> out;
  collect_modules("", out);
  return out;
}

Tensor Module::parameter(const std::string& dotted_name) const {
  const size_t dot = dotted_name.find('.');
  if (dot == std::string::npos) {
    for (const auto& [n, t] : params_)
      if (n == dotted_name) return t;
    for (const auto& [n, t] : buffers_)
      if (n == dotted_name) return t;
  } else {
    const std::string head = dotted_name.substr(0, dot);
    for (const auto& [n, child] : children_)
      if (n == head) return child->parameter(dotted_name.substr(dot + 1));
  }
  TG_FAIL("[Module] ", type_name(), " has no parameter or buffer \"", dotted_name, "\"");
}

void Module::train(bool on) {
  training_.set(on);
  for (auto& [_, child] : children_) child->train(on);
}

void Module::rewrite_tensors(const std::function<void(Tensor&)>& rewrite) {
  for (auto& [_, m] : named_modules()) {
    for (auto& [n, p] : m->params_) {
      rewrite(p);
      Tensor g = p.grad();
      rewrite(g);
    }
    for (auto& [n, b] : m->buffers_) rewrite(b);
  }
}

void Module::to(Device device) {
  rewrite_tensors([device](Tensor& t) { move_in_place(t, device); });
}

void Module::to(DType dtype) {
  TG_CHECK(is_floating(dtype), "[Module] ", type_name(), ".to: expected a floating dtype, got ", dtype_name(dtype));
  rewrite_tensors([dtype](Tensor& t) { convert_in_place(t, dtype); });
}

void Module::zero_grad(bool set_to_none) { tg::zero_grad(parameters(), set_to_none); }

void Module::print(std::string& out, int indent) const {
  out += type_name() + "(" + extra_repr();
  if (children_.empty()) {
    out += ")";
    return;
  }
  const std::string pad(static_cast<size_t>(indent + 2), ' ');
  out += "\n";
  for (const auto& [name, child] : children_) {
    out += pad + "(" + name + "): ";
    child->print(out, indent + 2);
    out += "\n";
  }
  out += std::string(static_cast<size_t>(indent), ' ') + ")";
}

std::string Module::to_string() const {
  std::string out;
  print(out, 0);
  return out;
}

}  // namespace tg::nn
