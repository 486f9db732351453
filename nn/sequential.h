// Sequential: a chain of modules applied in order, children named "0", "1", ...
#pragma once

#include <initializer_list>
#include <memory>

#include "nn/module.h"

namespace tg::nn {

// Feeds each module's output to the next; parameter names read "0.weight", "2.bias", ...
class Sequential : public Module {
 public:
  Sequential() = default;
  Sequential(std::initializer_list<std::shared_ptr<Module>> modules);

  // Appends a module under the next index.
  void push_back(std::shared_ptr<Module> module);
  Tensor forward(const Tensor& input) override;
  std::string type_name() const override { return "Sequential"; }

  size_t size() const { return named_children().size(); }
  // The i-th module (negative counts from the end).
  Module& operator[](int64_t i) const;
};

}  // namespace tg::nn
