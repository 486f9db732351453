// Guards: the facts about a call that a compiled graph was specialized on.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "ops/core/autocast.h"
#include "ops/core/guarded_value.h"
#include "tensor/tensor.h"
#include "tensor/tensor_meta.h"

namespace tg::graphs {

// What one argument must look like for a cached graph to apply.
struct ArgumentGuard {
  TensorMeta meta;
  bool requires_grad = false;
  int32_t alias_of = -1;  // earlier argument sharing storage, or -1
};

// The value of a non-tensor argument.
using HostValue = std::variant<bool, int64_t, double, std::string>;
// The value as recompile reasons print it ("true", "3", "0.5", "'mean'").
std::string host_value_str(const HostValue& v);

// A non-tensor argument of a call, by name (as recompile reasons print it) and value.
struct HostArgument {
  std::string name;  // e.g. "input 'e'", "len(input 'xs')", "input 'xs'[1]"
  HostValue value;
};

// A tensor the traced function captured (a parameter, a buffer, any tensor a lambda holds). It is
// held weakly: once nothing but compiled code refers to it, the caller has rebound or dropped it,
// and a graph that reads it would compute with a tensor the caller's code no longer uses.
// A handle made inside the function over outside memory (w.detach() of a parameter w: detach is
// no op the tracer sees) has nothing but the graph to hold it: it is guarded by its memory instead,
// held weakly too, and read through a handle of the recorded geometry.
struct CapturedGuard {
  std::weak_ptr<TensorImpl> tensor;
  ArgumentGuard meta;
  std::weak_ptr<StorageImpl> storage;  // for a handle made inside the function (`tensor` empty then)
  // The tensor as the graph reads it now; null once the caller dropped it (or its memory).
  std::shared_ptr<TensorImpl> lock() const;
};

// All guards of one cache entry.
class Guards {
 public:
  // Guards that the given call satisfies; `names` are the tensors' display names ("input 'x'"),
  // `host` the call's non-tensor arguments (guarded by value).
  static Guards capture(const TensorList& args, std::vector<std::string> names, std::vector<HostArgument> host = {});
  // Adds identity, storage and metadata guards for the tensors captured while tracing.
  void add_captured(const TensorList& captured);
  // Adds the host values the trace specialized on.
  void add_host_guards(std::vector<HostGuard> guards);
  // The first guard the call violates, in words ("input 1 requires_grad mismatch: expected true,
  // got false", "captured tensor 'lifted0' was replaced").
  std::optional<std::string> check(const TensorList& args, const std::vector<HostArgument>& host = {}) const;
  // False once a captured tensor is gone: the entry can never apply again.
  bool captured_alive() const;
  // The captured tensors, held for the duration of one call; check() must have passed.
  TensorList lock_captured() const;

 private:
  std::string name(size_t i) const;
  std::vector<ArgumentGuard> args_;
  std::vector<std::string> names_;
  std::vector<HostArgument> host_args_;
  bool grad_enabled_ = true;
  AutocastDtypes autocast_;  // autocast_dtypes() at capture
  std::vector<CapturedGuard> captured_;
  std::vector<HostGuard> host_;
};

// Display names of `n` tensor arguments: "input 'NAME'" from `names` where given, else "input I".
std::vector<std::string> input_display_names(size_t n, const std::vector<std::string>& names);

}  // namespace tg::graphs
