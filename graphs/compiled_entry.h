// What the files of compile() share: one compiled variant of a function (CompiledEntry: its guards,
// and its graphs and executors or an eager fallback), the state of a compiled function, and the
// steps between a call and its variant. Internal to graphs/; other code includes graphs/compile.h.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "graphs/calls/bucket_padding.h"
#include "graphs/calls/changing_dims.h"
#include "graphs/capture/guards.h"
#include "graphs/capture/joint.h"
#include "graphs/compile.h"
#include "graphs/counters.h"
#include "graphs/partition/partition.h"
#include "graphs/runtime/compiled_backward.h"
#include "graphs/runtime/executor.h"

namespace tg::graphs {

// Which executors run the graphs.
enum class Backend { Eager, AotEager, CudaGraphs };

// One specialization of a compiled function: its guards and either graphs or an eager fallback.
struct CompiledEntry {
  Guards guards;
  bool eager = false;
  JointGraph joint;
  Partition partition;
  std::unique_ptr<Executor> forward;
  std::unique_ptr<Executor> backward;
  bool cudagraphs = false;  // executors are CUDA graph executors
  std::vector<bool> written_in_graph;  // per mutated input: the forward graph writes it itself
  Graph forward_graph;                 // the partition's forward graph as executed (reinplaced)
  std::shared_ptr<UnitTangents> unit_tangents = std::make_shared<UnitTangents>();  // for loss.backward()
  uint64_t last_use = 0;  // the State's clock at the latest call it served (for evict_lru)
};

// What a compiled function keeps between calls: its options, its cache of entries and its counters.
struct CompiledFunction::State {
  GraphFn fn;
  CompileOptions options;
  Backend backend = Backend::AotEager;  // options.backend, parsed once
  PartitionerKind partitioner = PartitionerKind::Default;
  std::vector<std::shared_ptr<CompiledEntry>> entries;
  CompileCounters counters;
  bool warned_cache_limit = false;
  int id = 0;  // "function <id>" in strict capture errors and TG_LOGS=capture reports
  uint64_t clock = 0;  // calls so far, for least-recently-used eviction
  std::unique_ptr<BucketPlan> buckets;  // shape_buckets, validated (null without)
  // The bucketed call running, read by the wrapped function.
  std::shared_ptr<const PaddedCall*> padded = std::make_shared<const PaddedCall*>(nullptr);
  ChangingDims changing_dims;  // tells once of a dim that keeps changing
};

// Compiles a variant for `call` through the compile pipeline (compile_pipeline.cpp): an entry with
// graphs and executors, or an eager one when the call cannot be traced (eager_fallback.cpp).
std::shared_ptr<CompiledEntry> build_entry(CompiledFunction::State& s, const CallArgs& call);

// Runs a compiled entry on a call's tensors: the forward executor, the writes into the caller's
// tensors, outputs that alias inputs, and the backward node (run_entry.cpp).
TensorList run_entry(const std::shared_ptr<CompiledEntry>& entry, const TensorList& args);

// Traces s.fn for `args` into entry.joint. Returns false, with entry.eager set and the fallback
// counted, when this signature must run eagerly instead (data-dependent or untraceable code);
// fullgraph and strict_capture raise then instead (eager_fallback.cpp).
bool trace_or_fall_back(CompiledFunction::State& s, CompiledEntry& entry, const TensorList& args);

// Runs a call eagerly because the cache is full and nothing may be evicted: raises with
// strict_capture, warns once, counts the fallback. `reason`: the call's latest guard failure
// (eager_fallback.cpp).
TensorList run_past_cache_limit(CompiledFunction::State& s, const TensorList& args,
                                const std::optional<std::string>& reason);

}  // namespace tg::graphs
