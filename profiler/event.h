// What a profile records: host ranges (ops, CUDA graph replays) and device activity (kernels,
// copies, fills), on one clock.
#pragma once

#include <cstdint>
#include <string>

namespace tg::profiler {

// The kinds of recorded interval.
enum class EventKind : uint8_t {
  Op,       // a dispatched op, or a node a graph executor ran (host time)
  Range,    // a named host range that is not an op (a CUDA graph replay)
  Kernel,   // a CUDA kernel
  Memcpy,   // a CUDA copy
  Memset,   // a CUDA fill
  Runtime,  // a CUDA runtime or driver API call (host time; in the trace only)
};

// One recorded interval. Times are nanoseconds since the profiler started.
struct Event {
  EventKind kind = EventKind::Op;
  std::string name;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  // Host events: the recording thread (a small number, in order of first appearance).
  int thread = 0;
  // Device events: the device and stream they ran on.
  int device = -1;
  int64_t stream = 0;
  // Host events: this event's id (ids start at 1). Device events: the id of the host event that
  // launched them (the innermost open op or range when the launch was made), or 0.
  int64_t id = 0;
  // Host events: the enclosing host event's id, or 0.
  int64_t parent = 0;
  // Ops with ProfilerOptions::record_shapes: their inputs' sizes, as "[2, 3], [3]".
  std::string shapes;
  // Device events run by a CUDA graph: the op whose recording created their node, when the
  // profiler was running during that recording; empty otherwise.
  std::string graph_op;
  // Device events run by a CUDA graph: the graph node's id (0 otherwise).
  uint64_t graph_node = 0;
  // Copies and fills: bytes moved or written.
  int64_t bytes = 0;
  // The CUDA correlation id linking a launch call to the work it launched (0 on the host side of
  // ops and ranges).
  uint32_t correlation = 0;

  // Length in microseconds.
  double duration_us() const { return static_cast<double>(end_ns - start_ns) / 1000.0; }
  // True for kernels, copies and fills.
  bool on_device() const { return kind == EventKind::Kernel || kind == EventKind::Memcpy || kind == EventKind::Memset; }
};

}  // namespace tg::profiler
