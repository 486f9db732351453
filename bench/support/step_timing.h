// How the benchmarks time a training step: the same method as the anchors' scripts.
#pragma once

#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <functional>

#include "profiler/profiler.h"
#include "tensor/cuda_runtime.h"

namespace bench {

// With TG_BENCH_PROFILE=N (N > 0): `step` run N times under tg::profiler, and the table of its ops
// and kernels by device time printed before the benchmark is timed (its result line follows).
inline void profile_steps_if_asked(const std::function<void()>& step, int device) {
  const char* env = std::getenv("TG_BENCH_PROFILE");
  const int n = env != nullptr ? std::atoi(env) : 0;
  if (n <= 0) return;
  tg::cuda::synchronize(device);
  tg::profiler::Profiler prof;
  prof.start();
  for (int i = 0; i < n; ++i) step();
  tg::cuda::synchronize(device);
  const tg::profiler::Profile& p = prof.stop();
  std::printf("%d profiled steps of the benchmark below:\n%s\n", n, p.table({.row_limit = 25}).c_str());
}

// Times `step` as the anchors' scripts do: each benchmark iteration runs `steps` steps back to back
// and then waits for the device once, so the host queues the next step while the device runs this
// one. Reports microseconds per step in the `us_per_step` counter (the Time column is per iteration).
inline void time_steps(benchmark::State& state, const std::function<void()>& step, int steps, int device = 0) {
  profile_steps_if_asked(step, device);
  for (auto _ : state) {
    for (int i = 0; i < steps; ++i) step();
    tg::cuda::synchronize(device);
  }
  state.counters["us_per_step"] =
      benchmark::Counter(steps / 1e6, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

}  // namespace bench
