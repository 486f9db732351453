// When a call runs eagerly instead of through graphs: its signature cannot be traced (data-dependent
// or untraceable code), or the cache is full. Each fallback is counted with its reason and logged;
// fullgraph and strict_capture turn it into an error. See Note [Compile pipeline].
#include <iostream>
#include <string>

#include "graphs/compiled_entry.h"
#include "graphs/cudagraphs/strict_capture.h"
#include "graphs/logs.h"
#include "tensor/grad_mode.h"

namespace tg::graphs {
namespace {

// Counts one call run eagerly, with the reason.
void record_fallback(CompileCounters& local, const std::string& reason) {
  update_counters(&local, [&](CompileCounters& c) {
    ++c.eager_fallbacks;
    c.fallback_reasons.push_back(reason);
  });
}

}  // namespace

bool trace_or_fall_back(CompiledFunction::State& s, CompiledEntry& entry, const TensorList& args) {
  const bool grad_before = is_grad_enabled();
  try {
    entry.joint = trace_joint(s.fn, args);
  } catch (const Error& e) {
    const bool data_dependent = dynamic_cast<const DataDependentError*>(&e) != nullptr;
    if (!data_dependent && !dynamic_cast<const TraceFallback*>(&e)) throw;
    set_grad_enabled(grad_before);
    if (s.options.fullgraph && !s.options.strict_capture) throw;
    const std::string reason =
        std::string(data_dependent ? "data-dependent operation while tracing: " : "untraceable: ") + e.what();
    if (s.options.strict_capture) {
      const std::string where = "function " + std::to_string(s.id);
      try {
        strict_capture_failure(where, "the call would run eagerly: " + reason);
      } catch (const Error& strict) {
        // Still a DataDependentError where it was one, for code that catches those.
        if (data_dependent) throw DataDependentError(strict.what());
        throw;
      }
    }
    entry.eager = true;
    record_fallback(s.counters, reason);
    log_line("recompiles", "falling back to eager for this input signature: " + reason);
    return false;
  }
  set_grad_enabled(grad_before);
  return true;
}

TensorList run_past_cache_limit(CompiledFunction::State& s, const TensorList& args,
                                const std::optional<std::string>& reason) {
  if (s.options.strict_capture) {
    const std::string guard_failure = reason ? "; this call's guard failure: " + *reason : std::string();
    strict_capture_failure("function " + std::to_string(s.id), "the call would run eagerly: cache_limit reached (" +
                                                                  std::to_string(s.options.cache_limit) +
                                                                  " compiled variants)" + guard_failure);
  }
  if (!s.warned_cache_limit) {
    std::cerr << "tapegraph warning: compiled function hit its cache limit (" << s.options.cache_limit
              << " variants); further new input signatures run eagerly\n";
    s.warned_cache_limit = true;
  }
  record_fallback(s.counters, "cache_limit reached (" + std::to_string(s.options.cache_limit) + ")");
  return s.fn(args);
}

}  // namespace tg::graphs
