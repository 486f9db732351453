// Host-value guards: code that runs under tracing declares the host values it specialized on.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <variant>

namespace tg {

// A host value a traced computation may depend on (a flag, a count, a probability, a mode name).
using HostValue = std::variant<bool, int64_t, double, std::string>;

// The value in words as guard failures print it ("true", "3", "0.5", "'mean'").
std::string host_value_str(const HostValue& v);

// Re-reads a declared host value; nullopt once the object holding it is gone.
using HostValueReader = std::function<std::optional<HostValue>()>;

// Receives the declarations made while a function is traced (compile() installs one).
class HostGuardSink {
 public:
  virtual ~HostGuardSink() = default;
  // `name` identifies the value in recompile reasons, `current` is what the trace used, `reader`
  // reads it again on later calls, `owner` identifies its holder (declarations repeat per owner).
  virtual void declare(const std::string& name, const HostValue& current, HostValueReader reader,
                       const void* owner) = 0;
};

// Whether a sink is installed on this thread (code being traced by compile()).
bool host_guards_active();

// Declares that the running code specialized on a host value that `reader` can read again later.
// Outside tracing it does nothing; under compile() a later call whose re-read value differs
// recompiles with the reason "host value 'NAME' changed: expected X, got Y".
void guard_value(const std::string& name, const HostValue& current, HostValueReader reader, const void* owner);

// Declares the value behind a shared cell (read through a weak reference, so the guard never
// keeps its owner alive; a destroyed owner fails the guard).
template <typename T>
void guard_value(const std::string& name, const std::shared_ptr<T>& cell) {
  if (!host_guards_active()) return;
  std::weak_ptr<T> weak = cell;
  guard_value(name, HostValue(*cell), [weak]() -> std::optional<HostValue> {
    auto c = weak.lock();
    if (!c) return std::nullopt;
    return HostValue(*c);
  }, cell.get());
}

// Installs `sink` for this thread while alive (restores the previous one after).
class ScopedHostGuardSink {
 public:
  explicit ScopedHostGuardSink(HostGuardSink* sink);
  ~ScopedHostGuardSink();
  ScopedHostGuardSink(const ScopedHostGuardSink&) = delete;
  ScopedHostGuardSink& operator=(const ScopedHostGuardSink&) = delete;

 private:
  HostGuardSink* previous_;
};

}  // namespace tg
