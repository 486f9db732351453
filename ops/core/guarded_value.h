// Host values that traced code may specialize on. A compiled graph bakes in whatever host values
// its trace read (a training flag, a dropout probability, a branch condition); reading them through
// a Guarded<T> records a guard, so that a later change recompiles instead of replaying a stale graph.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>

namespace tg {

// One host-value guard: its name and a check that says why it no longer holds (nullopt: it holds).
struct HostGuard {
  std::string name;
  std::function<std::optional<std::string>()> check;
};

// Records `guard` with the active tracer, if any (a no-op outside tracing).
void record_host_guard(HostGuard guard);
// True while a function is being traced on this thread (reads of host values are then recorded).
bool is_tracing();

namespace detail {
template <typename T>
std::string guarded_str(const T& v) {
  if constexpr (std::is_same_v<T, bool>) {
    return v ? "true" : "false";
  } else if constexpr (std::is_same_v<T, std::string>) {
    return "'" + v + "'";
  } else {
    std::ostringstream os;
    os << v;
    return os.str();
  }
}
}  // namespace detail

// A host value held in a shared cell. get() under tracing records a guard that compares the value
// at every later call of the compiled function (and fails once the owner is gone).
template <typename T>
class Guarded {
 public:
  // Holds `value` under `name` (the name appears in recompile reasons).
  explicit Guarded(std::string name, T value = T{})
      : name_(std::make_shared<const std::string>(std::move(name))), cell_(std::make_shared<T>(std::move(value))) {}
  // Copies hold their own cell: a copied module does not share its training flag with the original.
  Guarded(const Guarded& other) : name_(other.name_), cell_(std::make_shared<T>(*other.cell_)) {}
  Guarded& operator=(const Guarded& other) {
    if (this != &other) {
      name_ = other.name_;
      cell_ = std::make_shared<T>(*other.cell_);
    }
    return *this;
  }

  // The value; under tracing, also a guard on it.
  const T& get() const {
    if (is_tracing()) record_host_guard(make_guard());
    return *cell_;
  }
  // Replaces the value (cached graphs that read the old one recompile on their next call).
  void set(T value) { *cell_ = std::move(value); }
  // The value without recording a guard (for code that does not shape a graph: printing, saving).
  const T& peek() const { return *cell_; }
  // The name used in recompile reasons.
  const std::string& name() const { return *name_; }

 private:
  HostGuard make_guard() const {
    std::weak_ptr<const T> weak = cell_;
    return HostGuard{*name_, [weak, expected = *cell_, name = name_]() -> std::optional<std::string> {
                       const auto now = weak.lock();
                       if (!now) return "host value '" + *name + "' was destroyed";
                       if (*now == expected) return std::nullopt;
                       return "host value '" + *name + "' changed: expected " + detail::guarded_str(expected) +
                              ", got " + detail::guarded_str(*now);
                     }};
  }
  std::shared_ptr<const std::string> name_;
  std::shared_ptr<T> cell_;
};

}  // namespace tg
