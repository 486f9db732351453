// compile()'s cache of variants: a call runs the variant whose guards it satisfies, or compiles one
// (compile_pipeline.cpp) or runs eagerly (eager_fallback.cpp); with shape buckets, it does so for
// the padded call. See Note [Compile pipeline] in docs/compile_pipeline.md.
#include "graphs/compile.h"

#include <algorithm>
#include <atomic>
#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include "graphs/compiled_entry.h"
#include "graphs/logs.h"
#include "tensor/grad_mode.h"

namespace tg::graphs {
namespace {

// options.backend by name; raises on an unknown one.
Backend parse_backend(const std::string& name) {
  if (name == "eager") return Backend::Eager;
  if (name == "aot_eager") return Backend::AotEager;
  if (name == "cudagraphs") return Backend::CudaGraphs;
  TG_FAIL("[compile] unknown backend '", name, "'; expected 'eager', 'aot_eager' or 'cudagraphs'");
}

// Records the shapes of a call that compiles (or falls back) anew; tells once of a dim that keeps changing.
void watch_changing_dims(CompiledFunction::State& s, const CallArgs& call) {
  ChangingDims::Skip skip;
  if (s.buckets)
    skip = [&s](const std::string& name, int64_t dim, int64_t rank) { return s.buckets->bucketed(name, dim, rank); };
  std::optional<std::string> advice = s.changing_dims.observe(call, skip);
  if (!advice) return;
  std::cerr << "tapegraph warning: compiled function " << s.id << ": " << *advice << "\n";
  log_line("recompiles", *advice);
  update_counters(&s.counters, [&](CompileCounters& c) { c.changing_dims.push_back(*advice); });
}

// Drops the least recently used entry (its graphs go once no pending backward holds them).
void evict_least_recent(CompiledFunction::State& s) {
  auto lru = std::min_element(s.entries.begin(), s.entries.end(),
                              [](const auto& a, const auto& b) { return a->last_use < b->last_use; });
  log_line("recompiles", "cache_limit reached (" + std::to_string(s.options.cache_limit) +
                             " variants): evicting the least recently used one");
  s.entries.erase(lru);
  update_counters(&s.counters, [](CompileCounters& c) { ++c.evictions; });
}

// Runs one (padded) call: finds or compiles its entry and runs it. `reused` tells whether an entry
// compiled before served it.
TensorList run_call(CompiledFunction::State& s, const CallArgs& call, bool& reused) {
  const TensorList& args = call.tensors;
  reused = false;
  if (s.backend == Backend::Eager) return s.fn(args);
  std::shared_ptr<CompiledEntry> entry;
  std::optional<std::string> reason;
  for (auto it = s.entries.begin(); it != s.entries.end();) {
    reason = (*it)->guards.check(args, call.host);
    if (!reason) {
      entry = *it;
      break;
    }
    // An entry whose captured tensor is gone can never apply again: drop it and its graphs, so a
    // loop that rebinds its weights retraces instead of filling the cache and running eagerly.
    if (!(*it)->guards.captured_alive()) {
      it = s.entries.erase(it);
      continue;
    }
    ++it;
  }
  reused = entry != nullptr;
  if (!entry) {
    watch_changing_dims(s, call);
    const bool lru = s.options.evict_lru || s.buckets;
    if (static_cast<int>(s.entries.size()) >= s.options.cache_limit && lru) evict_least_recent(s);
    if (static_cast<int>(s.entries.size()) >= s.options.cache_limit) return run_past_cache_limit(s, args, reason);
    if (reason) {
      update_counters(&s.counters, [&](CompileCounters& c) {
        ++c.recompiles;
        c.recompile_reasons.push_back(*reason);
      });
      log_line("recompiles", "recompiling: " + *reason);
    }
    entry = build_entry(s, call);
    s.entries.push_back(entry);
  }
  entry->last_use = ++s.clock;
  if (entry->eager) return s.fn(args);
  update_counters(&s.counters, [](CompileCounters& c) { ++c.compiled_calls; });
  TensorList outputs = run_entry(entry, args);
  set_grad_enabled(entry->joint.grad_enabled_after);
  return outputs;
}

}  // namespace

CompiledFunction::CompiledFunction(GraphFn fn, CompileOptions options) : state_(std::make_shared<State>()) {
  state_->fn = std::move(fn);
  state_->options = std::move(options);
  state_->backend = parse_backend(state_->options.backend);
  state_->partitioner = parse_partitioner(state_->options.partitioner);
  TG_CHECK(state_->options.cache_limit >= 1, "[compile] cache_limit must be at least 1, got ",
           state_->options.cache_limit);
  TG_CHECK(!state_->options.strict_capture || state_->backend == Backend::CudaGraphs,
           "[compile] strict_capture needs the 'cudagraphs' backend, got backend '", state_->options.backend, "'");
  static std::atomic<int> next_id{0};
  state_->id = ++next_id;
  if (!state_->options.shape_buckets.empty()) {
    state_->buckets = std::make_unique<BucketPlan>(state_->options.shape_buckets, state_->options.input_names,
                                                   state_->options.backend == "cudagraphs");
    state_->fn = state_->buckets->wrap(std::move(state_->fn), state_->padded);
  }
}

TensorList CompiledFunction::call(const TensorList& args) {
  return call(CallArgs{args, input_display_names(args.size(), state_->options.input_names), {}});
}

TensorList CompiledFunction::call(const CallArgs& call) {
  State& s = *state_;
  bool reused = false;
  if (!s.buckets) return run_call(s, call, reused);
  // See Note [Shape buckets]: pad, run the variant of the padded shapes, narrow the outputs back.
  PaddedCall padded = s.buckets->pad(call);
  struct Current {
    std::shared_ptr<const PaddedCall*> slot;
    const PaddedCall* previous;
    ~Current() { *slot = previous; }
  } current{s.padded, *s.padded};
  *s.padded = &padded;
  TensorList outputs = run_call(s, padded.call, reused);
  update_counters(&s.counters, [&](CompileCounters& c) {
    ++c.bucketed_calls;
    c.bucket_hits += reused ? 1 : 0;
    c.padded_calls += padded.padded ? 1 : 0;
  });
  return s.buckets->narrow_outputs(std::move(outputs), padded);
}

const CompileCounters& CompiledFunction::counters() const { return state_->counters; }

const JointGraph* CompiledFunction::last_joint() const {
  for (auto it = state_->entries.rbegin(); it != state_->entries.rend(); ++it)
    if (!(*it)->eager) return &(*it)->joint;
  return nullptr;
}

const Partition* CompiledFunction::last_partition() const {
  for (auto it = state_->entries.rbegin(); it != state_->entries.rend(); ++it)
    if (!(*it)->eager) return &(*it)->partition;
  return nullptr;
}

}  // namespace tg::graphs
