// How the benchmarks time a training step: the same method as the anchors' scripts.
#pragma once

#include <benchmark/benchmark.h>

#include <functional>

#include "tensor/cuda_runtime.h"

namespace bench {

// Times `step` as the anchors' scripts do: each benchmark iteration runs `steps` steps back to back
// and then waits for the device once, so the host queues the next step while the device runs this
// one. Reports microseconds per step in the `us_per_step` counter (the Time column is per iteration).
inline void time_steps(benchmark::State& state, const std::function<void()>& step, int steps, int device = 0) {
  for (auto _ : state) {
    for (int i = 0; i < steps; ++i) step();
    tg::cuda::synchronize(device);
  }
  state.counters["us_per_step"] =
      benchmark::Counter(steps / 1e6, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

}  // namespace bench
