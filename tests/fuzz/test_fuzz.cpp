// The differential fuzzer: random programs run eagerly and compiled must agree in outputs,
// aliasing, input mutations and gradients, over calls that may differ in input tensors (rebound
// static inputs), sizes (recompiles, shape buckets) and scalar arguments (guarded, or tg::dynamic).
// TG_FUZZ_PROGRAMS sets how many programs run (default 2000 on CUDA, 700 on the CPU), TG_FUZZ_SEED
// the first seed (default 1): TG_FUZZ_SEED=S TG_FUZZ_PROGRAMS=1 replays one.
// TG_FUZZ_VERBOSE=1 prints every program with its verdict.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>

#include "fuzz/fuzz_generator.h"
#include "support/test_support.h"

namespace tg::fuzz {
namespace {

uint64_t env_or(const char* name, uint64_t fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::strtoull(v, nullptr, 10) : fallback;
}

// Runs the configured programs; prints the count line and every mismatch with its reproducer.
void fuzz(const std::string& backend, Device device) {
  const uint64_t first = env_or("TG_FUZZ_SEED", 1);
  // On the CPU (ctest on two cores) fewer by default: programs with varying calls run up to six
  // calls and recompile, and 700 take about what 2000 of three identical calls took.
  const uint64_t count = env_or("TG_FUZZ_PROGRAMS", device.is_cuda() ? 2000 : 700);
  const bool verbose = env_or("TG_FUZZ_VERBOSE", 0) != 0;
  uint64_t matched = 0, eager_raised = 0, unstable = 0, mismatched = 0;
  uint64_t rebound = 0, resized = 0, bucketed = 0, with_scalars = 0;
  const FuzzStats before = fuzz_stats();
  for (uint64_t seed = first; seed < first + count; ++seed) {
    const Program program = generate_program(seed);
    rebound += !program.plan.rebound.empty() || !program.plan.captured.empty();
    resized += !program.plan.variant.empty();
    bucketed += program.plan.bucketed;
    with_scalars += !program.plan.scalars.empty();
    FuzzResult r;
    try {
      r = check_program(program, backend, device);
    } catch (const std::exception& e) {
      r = {Verdict::Mismatch, std::string("unexpected exception: ") + e.what() + "\nReproducer:\n" +
                                  print_program(program, backend, device)};
    }
    if (verbose) {
      std::printf("program %llu: %s\n%s%s\n", static_cast<unsigned long long>(seed),
                  r.verdict == Verdict::Match           ? "match"
                  : r.verdict == Verdict::EagerRaised   ? "eager raised"
                  : r.verdict == Verdict::EagerUnstable ? "eager unstable at this precision"
                                                        : "mismatch",
                  print_program(program, backend, device).c_str(), r.report.c_str());
    }
    switch (r.verdict) {
      case Verdict::Match: ++matched; break;
      case Verdict::EagerRaised: ++eager_raised; break;
      case Verdict::EagerUnstable: ++unstable; break;
      case Verdict::Mismatch:
        ++mismatched;
        ADD_FAILURE() << "fuzz program " << seed << " (" << backend << "): " << r.report;
        break;
    }
  }
  const FuzzStats stats = fuzz_stats();
  std::printf(
      "fuzz %s on %s: %llu programs, %llu matched, %llu skipped (eager raised), %llu skipped (eager unstable "
      "against float64), %llu mismatches; varying calls: %llu with rebound or captured inputs, %llu with changed sizes, %llu "
      "bucketed, %llu with scalar arguments; counters: %lld recompiles, %lld graph updates, %lld re-records, %lld "
      "bucketed calls\n",
      backend.c_str(), device.str().c_str(), static_cast<unsigned long long>(count), static_cast<unsigned long long>(matched),
      static_cast<unsigned long long>(eager_raised), static_cast<unsigned long long>(unstable),
      static_cast<unsigned long long>(mismatched), static_cast<unsigned long long>(rebound),
      static_cast<unsigned long long>(resized), static_cast<unsigned long long>(bucketed),
      static_cast<unsigned long long>(with_scalars), static_cast<long long>(stats.recompiles - before.recompiles),
      static_cast<long long>(stats.graph_updates - before.graph_updates),
      static_cast<long long>(stats.rerecords - before.rerecords),
      static_cast<long long>(stats.bucketed_calls - before.bucketed_calls));
  // A generator that only produced invalid programs would prove nothing.
  EXPECT_GT(matched, count / 2);
}

// Each size mode turns up among a few dozen seeds with the shapes it exists for: a matrix of at
// least 32 x 32 in some wide programs, more than six dims in some deep ones, and nothing over
// 3 dims of 4 in small ones.
TEST(Fuzz, GeneratorDrawsWideAndDeepPrograms) {
  int wide_with_matrix = 0, deep_past_inline = 0, small = 0;
  for (uint64_t seed = 1; seed <= 64; ++seed) {
    const Program program = generate_program(seed);
    const SizeMode mode = size_mode_of(seed);
    bool matrix = false, past_inline = false;
    for (const InputSpec& in : program.inputs) {
      matrix = matrix || (in.sizes.size() == 2 && in.sizes[0] >= 32 && in.sizes[1] >= 32);
      past_inline = past_inline || in.sizes.size() > 6;
      if (mode == SizeMode::Small) {
        EXPECT_LE(in.sizes.size(), 3u) << "seed " << seed;
        for (int64_t s : in.sizes) EXPECT_LE(s, 4) << "seed " << seed;
      }
    }
    small += mode == SizeMode::Small;
    wide_with_matrix += mode == SizeMode::Wide && matrix;
    deep_past_inline += mode == SizeMode::Deep && past_inline;
  }
  EXPECT_EQ(small, 48);
  EXPECT_GE(wide_with_matrix, 2);
  EXPECT_GE(deep_past_inline, 2);
}

// Every TG_LOGS channel prints its part (graphs, partitions, fusions, recompiles) for random
// programs: the printers meet absent gradients, aliases and every op's attributes there, and a
// graph printer once read past the values of such a graph.
TEST(Fuzz, LogsPrintRandomPrograms) {
  // Every channel on and stderr captured for the test's length, both restored however it ends.
  struct LogsCaptured {
    std::ostringstream text;
    std::streambuf* previous_cerr = std::cerr.rdbuf(text.rdbuf());
    const char* set = std::getenv("TG_LOGS");
    std::optional<std::string> previous_env = set != nullptr ? std::optional<std::string>(set) : std::nullopt;
    LogsCaptured() { setenv("TG_LOGS", "all", 1); }
    ~LogsCaptured() {
      if (previous_env) setenv("TG_LOGS", previous_env->c_str(), 1);
      else unsetenv("TG_LOGS");
      std::cerr.rdbuf(previous_cerr);
    }
  } logs;
  int matched = 0;
  for (uint64_t seed = 1; seed <= 300; ++seed)
    matched += check_program(generate_program(seed), "aot_eager", kCPU).verdict == Verdict::Match;
  EXPECT_GT(matched, 150);
  EXPECT_NE(logs.text.str().find("[tapegraph:graphs] joint graph:"), std::string::npos);
  EXPECT_NE(logs.text.str().find("[tapegraph:partition]"), std::string::npos);
}

TEST(Fuzz, AotEagerMatchesEagerOnCpu) { fuzz("aot_eager", kCPU); }

TEST(Fuzz, CudagraphsMatchesEagerOnCuda) {
  TG_REQUIRE_CUDA();
  fuzz("cudagraphs", cuda_device());
}

}  // namespace
}  // namespace tg::fuzz
