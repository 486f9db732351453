// Identity (returns its input) and ModuleList (an indexable list of registered submodules).
#pragma once

#include <initializer_list>
#include <memory>

#include "nn/module.h"

namespace tg::nn {

// Returns its input unchanged: stands where an architecture skips a layer (e.g. a downsample).
class Identity : public Module {
 public:
  Tensor forward(const Tensor& input) override { return input; }
  std::string type_name() const override { return "Identity"; }
};

// Holds submodules named "0", "1", ... so their parameters register; as in PyTorch it has no
// forward of its own (calling it throws): index it and call the modules.
class ModuleList : public Module {
 public:
  ModuleList() = default;
  ModuleList(std::initializer_list<std::shared_ptr<Module>> modules);
  // Appends a module under the next index.
  void push_back(std::shared_ptr<Module> module);
  Tensor forward(const Tensor& input) override;
  std::string type_name() const override { return "ModuleList"; }
  size_t size() const { return named_children().size(); }
  // The i-th module (negative counts from the end).
  Module& operator[](int64_t i) const;
  // The i-th module as a shared handle.
  std::shared_ptr<Module> at(int64_t i) const;
};

}  // namespace tg::nn
