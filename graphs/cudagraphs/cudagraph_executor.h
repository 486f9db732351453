// The cudagraphs executor: a graph cut into CUDA-graph segments and eager islands, with warm-up,
// recording, replay, static inputs, and stale-output protection.
#pragma once

#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "graphs/counters.h"
#include "graphs/cudagraphs/graph_recorder.h"
#include "graphs/cudagraphs/output_buffers.h"
#include "graphs/cudagraphs/segments.h"
#include "graphs/cudagraphs/strict_capture.h"
#include "graphs/runtime/executor.h"
#include "graphs/runtime/interpreter.h"

namespace tg::graphs {

// Runs a graph segment by segment. A capturable segment runs eagerly on its first call (warm-up),
// is recorded on its second, and is replayed after that. Static inputs (parameters, saved
// activations, outputs of earlier segments) are used in place and their addresses checked: a new
// address set records another instance of the segment, up to a limit, after which the segment runs
// eagerly. Other inputs are copied into the instance's buffers before each replay.
//
// Memory: every recording of a device allocates from one shared pool. An instance's output buffers
// belong to the tensors handed out over them, so they go back to the pool when those die, and a
// replay claims them again. A replay overwrites its output buffers and the scratch memory it used
// while recording; tensors in that memory written in an earlier step are invalidated (any use
// raises), while tensors of the current step are never overwritten: another instance is chosen or
// recorded instead.
class CudaGraphExecutor final : public Executor {
 public:
  // `static_inputs[i]` tells whether graph input i keeps its address across calls. `counters` may be null.
  // With `overlap_branches`, recordings put the nodes plan_branch_nodes picks on a branch stream.
  // With `checks.strict`, the constructor raises when the plan has an eager island, and run() raises
  // before a captured segment would run eagerly after its warm-up or be recorded again.
  CudaGraphExecutor(Graph graph, std::vector<bool> static_inputs, std::shared_ptr<GraphRecorder> recorder,
                    CompileCounters* counters, std::string label, bool starts_step, int max_instances = 8,
                    DeviceType capture_on = DeviceType::CUDA, bool overlap_branches = true,
                    CaptureChecks checks = {});
  ~CudaGraphExecutor() override;
  TensorList run(TensorList inputs) override;
  const Graph& graph() const { return graph_; }
  const SegmentPlan& plan() const { return plan_; }

 private:
  // A recording of a segment, where its outputs live, a segment's recordings (segment_instance.h).
  struct Instance;
  struct OutputSlot;
  struct SegmentState;
  // What one run did, for the TG_LOGS=capture report.
  struct RunReport {
    int replays = 0;
    int64_t kernels = 0;
    int replayed_nodes = 0;
    int recorded = 0;
    int warmup_nodes = 0;
    int transfer_nodes = 0;  // host transfers (is_host_transfer)
    int island_nodes = 0;
    int past_limit_nodes = 0;  // captured segments that gave up re-recording
    std::vector<std::string> islands;
  };
  using BufferList = std::vector<std::shared_ptr<OutputBuffer>>;

  // The plan and the run (cudagraph_executor.cpp).
  // "function 1 forward graph": who raises and reports.
  std::string where() const;
  // Runs segment `seg`'s nodes without capture, in its order.
  void run_eagerly(const Segment& seg, std::vector<Tensor>& env) const;
  // True for a value that keeps its address across calls (static inputs, constants, captured outputs).
  bool is_static(ValueId v) const;
  // Adds `n` to one of the function's counters.
  template <typename Field>
  void count(Field CompileCounters::*field, Field n = 1) {
    update_counters(counters_, [&](CompileCounters& c) { c.*field += n; });
  }
  // Counts `n` nodes run outside CUDA graphs for `reason`.
  void count_skip(const std::string& reason, int n = 1);

  // What a captured segment does on a call (recording_policy.cpp).
  // Runs captured segment `s`: warm-up, replay, update, recording, or eagerly past the limit.
  void run_captured(size_t s, std::vector<Tensor>& env);
  // An instance whose static inputs match and whose replay overwrites no tensor of the current
  // step, with the other graphs' buffers that replay overwrites; null when there is none.
  Instance* find_instance(SegmentState& state, const Segment& seg, const std::vector<Tensor>& env,
                          const std::set<const StorageImpl*>& consumed, BufferList& overwritten);
  // The other graphs' buffers `inst`'s replay overwrites, or nothing when one of them (or one of
  // inst's own) holds tensors of the current step other than `consumed` (inputs this replay is the
  // last reader of, held by nothing else).
  std::optional<BufferList> overwritable(const Instance& inst, const std::set<const StorageImpl*>& consumed) const;
  // Why segment `s` needs another recording: a static input at a new address, live outputs, or
  // memory in use (`memory_in_use`: an instance matched but its memory could not be taken).
  std::string rerecord_reason(size_t s, const std::vector<Tensor>& env, bool memory_in_use) const;

  // An instance that differs from the call only in where some of its static inputs live, updated in
  // place (RecordedGraph::retarget) to read them there, with the buffers its replay overwrites (as
  // find_instance); null when none can be (instance_update.cpp).
  Instance* update_instance(SegmentState& state, size_t s, const std::vector<Tensor>& env,
                            const std::set<const StorageImpl*>& consumed, BufferList& overwritten);

  // Recording (segment_recording.cpp).
  // Per input of segment `s`: a static input whose last reader is in the segment and that nothing
  // but this run holds, so a recording may free it after its last reader and reuse its memory.
  std::vector<bool> consumed_inputs(size_t s, const std::vector<Tensor>& env) const;
  // Records `seg` as a new instance of `state`; the `consumed` inputs are handed to the recording.
  Instance* record(SegmentState& state, const Segment& seg, std::vector<Tensor>& env,
                   const std::vector<bool>& consumed);

  // Replay (segment_replay.cpp).
  // Copies the segment's inputs that are not static into inst's input buffers.
  void copy_inputs(Instance& inst, const Segment& seg, const std::vector<Tensor>& env);
  // Invalidates `overwritten` and inst's earlier outputs and claims its output buffers; returns their
  // memory, or nothing when some of it is unexpectedly in use.
  // `consumed`: blocks of inputs this replay consumes, which it may overwrite after reading them.
  std::optional<std::vector<std::shared_ptr<void>>> take_memory(Instance& inst, const BufferList& overwritten,
                                                                const std::vector<const void*>& consumed = {});
  // Replays `inst` into `memory` and sets the segment's outputs in `env` to tensors over it.
  void replay(Instance& inst, const std::vector<std::shared_ptr<void>>& memory, const Segment& seg,
              std::vector<Tensor>& env);

  // Prints the TG_LOGS=capture line of the run that just finished (capture_report.cpp).
  void report_run() const;


  Graph graph_;
  std::vector<bool> static_values_;  // per value: keeps its address across calls
  std::shared_ptr<GraphRecorder> recorder_;
  CompileCounters* counters_;
  std::string label_;
  bool starts_step_;
  int max_instances_;
  DeviceType capture_on_;
  CaptureChecks checks_;
  int runs_ = 0;
  RunReport report_;
  SegmentPlan plan_;
  Interpreter interpreter_;
  std::vector<std::vector<ValueId>> release_after_segment_;
  std::vector<std::vector<bool>> consumable_;  // per segment input: may be consumed (see consumed_inputs)
  std::vector<std::unique_ptr<SegmentState>> states_;
};

}  // namespace tg::graphs
