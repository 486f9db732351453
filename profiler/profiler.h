// tg::profiler: what a stretch of a program spent, per op and per CUDA kernel, on the host and on
// the device, modelled on torch.profiler. Ops come from the dispatcher's one hook (eager calls and
// the nodes graph executors run), CUDA graph replays from the executor's, device activity from
// CUPTI's activity API (kernels launched eagerly and kernels of replayed graphs alike), memory from
// the caching allocator's counters. Results print as a table (key_averages) and export as a Chrome
// trace (chrome://tracing, Perfetto). See Note [Profiler] in docs/profiler.md.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "profiler/event.h"
#include "profiler/key_averages.h"

namespace tg::profiler {

// What a profile records.
struct ProfilerOptions {
  // CUDA kernels, copies and fills through CUPTI, when the build has CUDA, a device is present and
  // libcupti loads; otherwise host events only.
  bool cuda = true;
  // The sizes of each op's inputs (Event::shapes), for key_averages(true).
  bool record_shapes = false;
  // An NVTX range around every op and graph replay, so Nsight Systems shows them.
  bool nvtx = true;
};

// Memory counters of the caching allocator around a profile (CUDA builds with a device).
struct MemorySnapshot {
  int64_t allocated_bytes = 0;
  int64_t reserved_bytes = 0;
  int64_t peak_allocated_bytes = 0;  // since the program start or the last reset_peak_memory_stats
};

// Everything one profile recorded.
class Profile {
 public:
  Profile() = default;
  Profile(std::vector<Event> events, std::string device_note, MemorySnapshot at_start, MemorySnapshot at_stop);

  // Every event, host events first by start time, then device events by start time.
  const std::vector<Event>& events() const { return events_; }
  // Totals per name (and input shapes, with group_by_shapes).
  std::vector<KeyAverage> key_averages(bool group_by_shapes = false) const;
  // key_averages() as a table.
  std::string table(const TableOptions& options = {}) const;
  // Writes the events as Chrome trace JSON ("traceEvents"), loadable in chrome://tracing and
  // Perfetto: host events per thread, device events per device and stream, launch arrows between.
  void export_chrome_trace(const std::string& path) const;
  // Why device activity is missing, when it is ("" when CUPTI recorded).
  const std::string& device_note() const { return device_note_; }
  // The allocator's counters when the profile started and stopped.
  const MemorySnapshot& memory_at_start() const { return at_start_; }
  const MemorySnapshot& memory_at_stop() const { return at_stop_; }

 private:
  std::vector<Event> events_;
  std::string device_note_;
  MemorySnapshot at_start_, at_stop_;
};

// Records ops, CUDA graph replays and device activity between start() and stop(). One profiler
// records at a time in a process; stop() (or the destructor) ends the recording.
class Profiler {
 public:
  explicit Profiler(ProfilerOptions options = {});
  ~Profiler();
  Profiler(const Profiler&) = delete;
  Profiler& operator=(const Profiler&) = delete;

  // Starts recording (errors when another profiler is recording).
  void start();
  // Drops what was recorded so far and keeps recording: warm-up steps run under the profiler (so
  // it sees CUDA graphs being recorded and can name the op of every graph node) but stay out of
  // the results.
  void reset();
  // Stops recording (after the device finished the work launched so far) and returns the profile.
  const Profile& stop();
  // The last stopped profile.
  const Profile& profile() const { return profile_; }
  // True between start() and stop().
  bool recording() const;

  // Internal state (profiler.cpp).
  struct Session;

 private:
  ProfilerOptions options_;
  std::unique_ptr<Session> session_;
  Profile profile_;
};

// The caching allocator's state on `device` (-1: the current one) as a text table, as
// torch.cuda.memory_summary() gives it; "no CUDA device" without one.
std::string memory_summary(int device = -1);

}  // namespace tg::profiler
