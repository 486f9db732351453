// Module: the base of trainable building blocks; it owns named parameters, buffers and submodules.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ops/core/guarded_value.h"
#include "tensor/device.h"
#include "tensor/tensor.h"

namespace tg::nn {

class Module;

// A (dotted name, tensor) pair as returned by named_parameters() / named_buffers().
using NamedTensor = std::pair<std::string, Tensor>;
// A (name, module) pair as returned by named_children() / named_modules().
using NamedModule = std::pair<std::string, std::shared_ptr<Module>>;

// Holds parameters (trainable leaves), buffers (state that is not trained) and child modules in
// registration order, as torch.nn.Module does. Parameters are shared handles: an optimizer built
// from parameters() keeps seeing them after to(device), because the handles stay the same.
class Module {
 public:
  virtual ~Module() = default;
  Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // The computation; every module maps one tensor to one tensor so Sequential can chain them.
  virtual Tensor forward(const Tensor& input) = 0;
  // forward(input) between the forward hooks (as PyTorch's module.__call__).
  Tensor operator()(const Tensor& input);
  // Runs `body` as one call of this module, between its forward hooks: for entry points other than
  // forward (GPT::loss), which would otherwise bypass what the hooks do (fully_shard's gathers).
  Tensor call(const std::function<Tensor()>& body);

  // Runs before each call through operator() or call(), as PyTorch's register_forward_pre_hook.
  using ForwardPreHook = std::function<void(Module&)>;
  // Runs after each such call with its output, as PyTorch's register_forward_hook.
  using ForwardHook = std::function<void(Module&, const Tensor& output)>;
  void register_forward_pre_hook(ForwardPreHook hook);
  void register_forward_hook(ForwardHook hook);

  // Short type name used when printing, e.g. "Linear".
  virtual std::string type_name() const = 0;
  // Constructor arguments shown when printing, e.g. "in_features=64, out_features=10, bias=true".
  virtual std::string extra_repr() const { return {}; }
  // The module tree in PyTorch's print format.
  std::string to_string() const;

  // Adds a trainable tensor under `name`; it becomes a leaf with requires_grad set as asked.
  Tensor register_parameter(const std::string& name, Tensor tensor, bool requires_grad = true);
  // Adds a non-trained tensor (running statistics, masks); it moves with to(device).
  Tensor register_buffer(const std::string& name, Tensor tensor);
  // Adds a child module; its parameters appear as "name.param" in named_parameters().
  template <typename M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> module) {
    add_child(name, module);
    return module;
  }

  // This module's parameters and, with recurse, its descendants', named with dotted paths.
  std::vector<NamedTensor> named_parameters(bool recurse = true) const;
  std::vector<NamedTensor> named_buffers(bool recurse = true) const;
  TensorList parameters(bool recurse = true) const;
  TensorList buffers(bool recurse = true) const;
  // Direct children only.
  const std::vector<NamedModule>& named_children() const { return children_; }
  // This module (named "") and all descendants (dotted names), depth first.
  std::vector<std::pair<std::string, Module*>> named_modules();
  // The parameter or buffer at a dotted path ("0.weight"); errors when there is none.
  Tensor parameter(const std::string& dotted_name) const;

  // Every parameter and buffer by dotted name ("0.weight", "bn.running_mean"), as PyTorch's
  // state_dict(): detached handles that share storage with the module.
  std::map<std::string, Tensor> state_dict() const;
  // Copies `dict` into the parameters and buffers (onto their devices). Every entry is checked
  // first (missing or, with strict, unexpected keys; dtype; shape) and the error names the key;
  // nothing is modified unless all of them pass.
  void load_state_dict(const std::map<std::string, Tensor>& dict, bool strict = true);

  // Switches training mode for this module and all descendants (dropout-like modules read it).
  virtual void train(bool on = true);
  void eval() { train(false); }
  // Training mode; under tracing also a guard, so a compiled function recompiles when it changes.
  bool is_training() const { return training_.get(); }

  // Moves every parameter, buffer and gradient to `device` in place: tensor handles keep their
  // identity (and optimizer references stay valid), only the storage behind them changes.
  void to(Device device);
  // Converts every floating parameter, gradient and buffer to `dtype` in place, as PyTorch's
  // module.to(dtype) (integer buffers such as num_batches_tracked stay); handles keep their identity.
  void to(DType dtype);
  // Clears gradients: drops them (set_to_none) or fills them with zeros.
  void zero_grad(bool set_to_none = true);

 protected:
  void add_child(const std::string& name, std::shared_ptr<Module> module);

 private:
  // Calls `rewrite` on every parameter, gradient and buffer of this module and its descendants.
  void rewrite_tensors(const std::function<void(Tensor&)>& rewrite);

  void collect(const std::string& prefix, bool recurse, bool buffers, std::vector<NamedTensor>& out) const;
  void collect_modules(const std::string& prefix, std::vector<std::pair<std::string, Module*>>& out);
  void print(std::string& out, int indent) const;
  void check_new_name(const std::string& name) const;

  std::vector<NamedTensor> params_;
  std::vector<NamedTensor> buffers_;
  std::vector<NamedModule> children_;
  Guarded<bool> training_{"training", true};
  std::vector<ForwardPreHook> forward_pre_hooks_;
  std::vector<ForwardHook> forward_hooks_;
};

// Moves `t` to `device` while keeping its handle: t's storage is replaced by a copy on `device`.
void move_in_place(Tensor& t, Device device);

}  // namespace tg::nn
