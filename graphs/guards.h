// Guards: the facts about a call's inputs that a compiled graph was specialized on.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ops/guard_value.h"
#include "tensor/tensor.h"
#include "tensor/tensor_meta.h"

namespace tg::graphs {

// Declares a host value the traced code specialized on (see ops/guard_value.h).
using tg::guard_value;

// What one argument must look like for a cached graph to apply.
struct ArgumentGuard {
  TensorMeta meta;
  bool requires_grad = false;
  int32_t alias_of = -1;  // earlier argument sharing storage, or -1
};

// A non-tensor argument of a call, by name (as recompile reasons print it) and value.
struct HostArgument {
  std::string name;  // e.g. "input 'e'" or "len(input 'xs')"
  HostValue value;
};

// A host value declared while tracing (guard_value), re-read on every call.
struct HostValueGuard {
  std::string name;
  HostValue expected;
  HostValueReader reader;
  const void* owner = nullptr;
};

// A tensor the function captured: held weakly, so that a rebinding (the last other owner let it
// go) or a swapped storage is seen instead of computing with a stale tensor.
struct LiftedGuard {
  std::weak_ptr<TensorImpl> tensor;
  std::weak_ptr<StorageImpl> storage;
  ArgumentGuard guard;
};

// All guards of one cache entry.
class Guards {
 public:
  // Guards that the given call satisfies; `names` are the tensors' display names ("input 'x'").
  static Guards capture(const TensorList& args, std::vector<std::string> names, std::vector<HostArgument> host = {});
  // Identity, storage and metadata guards for the tensors captured while tracing.
  void add_lifted(const TensorList& lifted);
  // A host value declared while tracing (one per name and owner; the first declaration wins).
  void add_host_value(HostValueGuard g);
  // The first guard the call violates, in words ("input 1 requires_grad mismatch: expected true, got false").
  std::optional<std::string> check(const TensorList& args, const std::vector<HostArgument>& host = {}) const;
  // The captured tensors; nullopt when one of them is gone or had its storage replaced.
  std::optional<TensorList> lifted() const;
  // Host values declared while tracing.
  const std::vector<HostValueGuard>& host_values() const { return host_values_; }

 private:
  std::string name(size_t i) const;
  std::vector<ArgumentGuard> args_;
  std::vector<std::string> names_;
  std::vector<HostArgument> host_args_;
  bool grad_enabled_ = true;
  std::vector<LiftedGuard> lifted_;
  std::vector<HostValueGuard> host_values_;
};

// Display names of `n` tensor arguments: "input 'NAME'" from `names` where given, else "input I".
std::vector<std::string> input_display_names(size_t n, const std::vector<std::string>& names);

}  // namespace tg::graphs
