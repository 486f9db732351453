// Ranges a profiler observes: every dispatched op, every node a graph executor runs, every CUDA
// graph replay. Declared here, below the profiler (profiler/), which installs the one listener, so
// that ops/ and graphs/ report without including it. With no listener installed a range costs one
// atomic load and a branch.
#pragma once

#include <atomic>
#include <string>

#include "ops/core/op.h"

namespace tg {

// Receives the ranges of the thread that opens them; ranges nest and close in reverse order.
class RangeListener {
 public:
  virtual ~RangeListener() = default;
  // An op begins: dispatched eagerly, or run by a graph executor.
  virtual void begin_op(const Op& op, const TensorList& inputs) = 0;
  // A range that is not an op begins (a CUDA graph replay; `category` groups such ranges).
  virtual void begin_range(const std::string& name, const char* category) = 0;
  // The innermost open range ends.
  virtual void end() = 0;
};

namespace profile_hooks {

// The installed listener (null when nothing listens).
inline std::atomic<RangeListener*>& listener_slot() {
  static std::atomic<RangeListener*> slot{nullptr};
  return slot;
}

}  // namespace profile_hooks

// The listener ranges go to now, or null.
inline RangeListener* range_listener() { return profile_hooks::listener_slot().load(std::memory_order_acquire); }
// Installs `listener` (null: none); the caller keeps it alive until it is replaced.
inline void set_range_listener(RangeListener* listener) {
  profile_hooks::listener_slot().store(listener, std::memory_order_release);
}

// An op's range for the scope's lifetime, when a listener is installed.
class OpRange {
 public:
  OpRange(const Op& op, const TensorList& inputs) : listener_(range_listener()) {
    if (listener_) listener_->begin_op(op, inputs);
  }
  ~OpRange() {
    if (listener_) listener_->end();
  }
  OpRange(const OpRange&) = delete;
  OpRange& operator=(const OpRange&) = delete;

 private:
  RangeListener* listener_;
};

// A named range for the scope's lifetime, when a listener is installed. `name` is built only then.
class NamedRange {
 public:
  template <typename NameFn>
  NamedRange(const char* category, const NameFn& name) : listener_(range_listener()) {
    if (listener_) listener_->begin_range(name(), category);
  }
  ~NamedRange() {
    if (listener_) listener_->end();
  }
  NamedRange(const NamedRange&) = delete;
  NamedRange& operator=(const NamedRange&) = delete;

 private:
  RangeListener* listener_;
};

}  // namespace tg
