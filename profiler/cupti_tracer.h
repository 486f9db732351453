// Device activity through CUPTI's activity API, loaded at run time: a program that never profiles
// never loads libcupti, and one that cannot load it profiles host events only.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "profiler/event.h"

namespace tg::profiler {

// Records kernels, copies, fills and CUDA API calls of every device while alive (one at a time).
class CuptiTracer {
 public:
  // Starts tracing. `current_op` names the op that is recording on the calling thread (it names
  // the nodes of CUDA graphs captured while tracing). Null, with the reason in `why`, when CUPTI
  // cannot trace here (a build without CUDA, no device, no libcupti, another CUPTI client).
  static std::unique_ptr<CuptiTracer> start(std::function<std::string()> current_op, std::string& why);
  ~CuptiTracer();
  CuptiTracer(const CuptiTracer&) = delete;
  CuptiTracer& operator=(const CuptiTracer&) = delete;

  // CUDA calls this thread makes from now until pop_launcher() were made inside host event `id`.
  void push_launcher(int64_t id);
  // Ends the innermost push_launcher() of this thread.
  void pop_launcher();
  // CUPTI's clock now, in nanoseconds (the clock of the device events).
  uint64_t now_ns() const;
  // Drops the device events recorded so far (the names of graph nodes are kept).
  void discard();
  // Waits for the devices, stops tracing and returns the device events and API calls, their times
  // moved to the host clock by adding `offset_ns`. Device events carry the launching host event's
  // id (0 when none was open) and, for graph nodes it saw created, the op that recorded them.
  std::vector<Event> finish(int64_t offset_ns);

  // Internal state (cupti_tracer.cpp).
  struct State;

 private:
  explicit CuptiTracer(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace tg::profiler
