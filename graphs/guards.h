// Guards: the facts about a call's inputs that a compiled graph was specialized on.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "tensor/tensor.h"
#include "tensor/tensor_meta.h"

namespace tg::graphs {

// What one argument must look like for a cached graph to apply.
struct ArgumentGuard {
  TensorMeta meta;
  bool requires_grad = false;
  int32_t alias_of = -1;  // earlier argument sharing storage, or -1
};

// All guards of one cache entry.
class Guards {
 public:
  // Guards that the given call satisfies.
  static Guards capture(const TensorList& args, const std::vector<std::string>& names);
  // Adds identity/metadata guards for captured tensors found while tracing.
  void add_lifted(const TensorList& lifted);
  // The first guard `args` violate, in words ("input 1 requires_grad mismatch: expected true, got false").
  std::optional<std::string> check(const TensorList& args) const;

 private:
  std::string name(size_t i) const;
  std::vector<ArgumentGuard> args_;
  std::vector<std::string> names_;
  bool grad_enabled_ = true;
  TensorList lifted_;
  std::vector<ArgumentGuard> lifted_guards_;
};

}  // namespace tg::graphs
