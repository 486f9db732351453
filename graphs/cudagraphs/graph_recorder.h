// The only device-specific part of the CUDA graph backend: capture, instantiate, replay.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "graphs/cudagraphs/memory_range.h"
#include "tensor/memory/cuda_memory.h"
#include "tensor/tensor.h"

namespace tg::graphs {

// One recorded graph that can be replayed.
class RecordedGraph {
 public:
  // `written`: see written().
  explicit RecordedGraph(std::vector<MemoryRange> written = {}) : written_(std::move(written)) {}
  virtual ~RecordedGraph() = default;
  // Runs the recorded work again, writing into the same buffers as when it was recorded.
  virtual void replay() = 0;
  // Kernel launches one replay makes (0 where the recorder does not record device kernels).
  virtual int64_t kernels() const { return 0; }
  // Makes later replays read and write the moved blocks at their new places instead of recording
  // again; false (with the reason, the graph unchanged) where this graph cannot be updated.
  virtual bool retarget(const std::vector<AddressMove>& moves, std::string& why) {
    (void)moves;
    why = "this recorder's graphs cannot be updated";
    return false;
  }
  // The shared pool's memory a replay writes (every allocation made while recording), sorted and
  // disjoint; empty when the recorder has no shared pool.
  const std::vector<MemoryRange>& written() const { return written_; }

 private:
  std::vector<MemoryRange> written_;
};

// Records the work of a function into a replayable graph. The executor's decision logic talks only
// to this interface, so it is unit-tested on the CPU with a recorder that re-runs the function.
class GraphRecorder {
 public:
  virtual ~GraphRecorder() = default;
  // Captures `body` (allocating from the recorder's shared pool, where it has one) and returns the
  // graph plus the tensors body returned. The tensors' contents are valid only after a replay.
  virtual std::pair<std::unique_ptr<RecordedGraph>, TensorList> record(const std::function<TensorList()>& body) = 0;
  // Takes `range` of the shared pool again (an output buffer whose tensors all died) and returns
  // its owner, or null when part of it is in use (or the recorder has no shared pool).
  virtual std::shared_ptr<void> reclaim(const MemoryRange& range) = 0;
  // True when memory of the shared pool inside `ranges` (sorted, disjoint) is in use by blocks other
  // than those starting at `own` (a recording's output buffers: the tail of an output's block can
  // lie in the scratch memory its capture wrote).
  virtual bool in_use(const std::vector<MemoryRange>& ranges, const std::vector<const void*>& own) = 0;
  // Runs `fn` eagerly with its allocations in the shared pool (a graph's warm-up call).
  virtual void warm_up(const std::function<void()>& fn) { fn(); }
  // Makes ready what record_on_branch needs (per-stream library handles), before a record() whose
  // body uses branches.
  virtual void prepare_branches() {}
  // Inside record()'s body: records `work` (graph nodes that what follows does not read) on a branch
  // that may run beside the work recorded after it, until join_branches(), and returns its results;
  // `keep_alive` (what the work reads) and the results stay referenced, and memory the work frees
  // stays held, until then. The default records it in line.
  virtual TensorList record_on_branch(const std::function<TensorList()>& work, TensorList keep_alive) {
    (void)keep_alive;
    return work();
  }
  // Orders everything recorded on branches so far before what is recorded next.
  virtual void join_branches() {}
  // True when a replay reads its static inputs by address only (a captured graph): a static input
  // whose last reader is in the recording may then be released inside it, and its memory reused
  // by the rest of the recording. A recorder that re-runs the body needs its inputs kept.
  virtual bool replays_by_address() const { return false; }
};

// The CUDA recorder for `device`: captures on a side stream into the device's one private pool
// (shared by every recording), with cuBLAS made capture-safe; instantiates with cudaGraphInstantiate.
std::shared_ptr<GraphRecorder> cuda_graph_recorder(Device device);
// The private pool all CUDA graphs on `device` allocate from (for cuda::mempool_stats).
cuda::MempoolId cudagraph_mempool(Device device);

// A recorder for tests: "recording" runs body, "replay" runs it again and copies the results into
// the first run's tensors, which is what a real replay's effect on memory is.
std::shared_ptr<GraphRecorder> rerun_graph_recorder();

}  // namespace tg::graphs
