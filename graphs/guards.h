// Guards: the facts about a call that a compiled graph was specialized on.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ops/guarded_value.h"
#include "tensor/tensor.h"
#include "tensor/tensor_meta.h"

namespace tg::graphs {

// What one argument must look like for a cached graph to apply.
struct ArgumentGuard {
  TensorMeta meta;
  bool requires_grad = false;
  int32_t alias_of = -1;  // earlier argument sharing storage, or -1
};

// A tensor the traced function captured (a parameter, a buffer, any tensor a lambda holds). It is
// held weakly: once nothing but compiled code refers to it, the caller has rebound or dropped it,
// and a graph that reads it would compute with a tensor the caller's code no longer uses.
struct CapturedGuard {
  std::weak_ptr<TensorImpl> tensor;
  ArgumentGuard meta;
};

// All guards of one cache entry.
class Guards {
 public:
  // Guards that the given call satisfies.
  static Guards capture(const TensorList& args, const std::vector<std::string>& names);
  // Adds identity, storage and metadata guards for the tensors captured while tracing.
  void add_captured(const TensorList& captured);
  // Adds the host values the trace specialized on.
  void add_host_guards(std::vector<HostGuard> guards);
  // The first guard the call violates, in words ("input 1 requires_grad mismatch: expected true,
  // got false", "captured tensor 'lifted0' was replaced").
  std::optional<std::string> check(const TensorList& args) const;
  // The captured tensors, held for the duration of one call; check() must have passed.
  TensorList lock_captured() const;

 private:
  std::string name(size_t i) const;
  std::vector<ArgumentGuard> args_;
  std::vector<std::string> names_;
  bool grad_enabled_ = true;
  std::vector<CapturedGuard> captured_;
  std::vector<HostGuard> host_;
};

}  // namespace tg::graphs
