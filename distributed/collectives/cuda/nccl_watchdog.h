// The watchdog of an NCCL communicator: turns a stalled collective (a dead or hung peer) into a
// message naming what this rank waited in, an aborted communicator and an exit, instead of a hang.
// See Note [Named hangs] in docs/data_parallel.md.
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "distributed/collectives/collective_context.h"
#include "tensor/captured_work.h"

namespace tg::distributed {

// What a communicator notes about a collective recorded into a CUDA graph: its name and context.
struct CapturedCollective final : CapturedNote {
  CapturedCollective(const char* name, CollectiveContext context) : name(name), context(std::move(context)) {}
  const char* name;
  CollectiveContext context;
};

// Watches, from a thread of its own, the eager collectives of one communicator (an event after
// each), the replays of CUDA graphs holding its collectives (an event after each replay: the
// collectives inside cannot be watched one by one), and the communicator's asynchronous errors.
// Past `timeout` it prints which collective (or which graph replay, and the last step whose replay
// completed) this rank waited in, aborts the communicator and exits the process with code 1.
class NcclWatchdog final : public ReplayWatcher {
 public:
  NcclWatchdog(int rank, int device, std::chrono::milliseconds timeout) : rank_(rank), device_(device), timeout_(timeout) {}
  ~NcclWatchdog() override { stop(); }

  void start(ncclComm_t comm);
  // Joins the thread and drops what is pending; later calls do nothing.
  void stop();
  // Watches the work queued on `stream` so far: collective `name` with `context` (numbered here).
  void watch(const char* name, const std::string& context, cudaStream_t stream);
  // A graph holding `held` (CapturedCollective notes) was launched on the current stream.
  void replayed(const std::string& graph, const std::vector<std::shared_ptr<const CapturedNote>>& held) override;

 private:
  using Clock = std::chrono::steady_clock;
  struct Item {
    cudaEvent_t done = nullptr;
    Clock::time_point queued;
    std::string what;  // an eager collective: "all_reduce_into #37 (DDP bucket 2 of 3, step 12)"
    // A replay: the graph, its collectives with the first one's number, and its step (or replay).
    std::string graph;
    std::vector<std::shared_ptr<const CapturedNote>> held;
    int64_t first_sequence = 0;
    int64_t step = -1;
    bool counted_by_step = false;  // false: `step` counts the graph's replays
  };

  cudaEvent_t take_event();  // under mutex_
  void loop();
  [[noreturn]] void fail(const std::string& why);
  // "in all_reduce #37 (...)" or "inside a replayed CUDA graph (...), step S; the last step ...".
  std::string describe_wait(const Item& item) const;

  int rank_;
  int device_;
  std::chrono::milliseconds timeout_;
  ncclComm_t comm_ = nullptr;
  std::thread thread_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Item> items_;
  std::vector<cudaEvent_t> free_events_;           // events of completed items, reused
  std::map<std::string, int64_t> replays_;         // per graph without a step counter: replays so far
  std::map<std::string, int64_t> last_completed_;  // per graph: the step (or replay) that completed last
  int64_t sequence_ = 0;
  bool started_ = false;
  bool stopping_ = false;
};

}  // namespace tg::distributed
