// Device selection and synchronization shared by the CPU/CUDA benchmarks.
#pragma once

#include <benchmark/benchmark.h>

#include <optional>

#include "tensor/cuda_runtime.h"
#include "tensor/device.h"

namespace bench {

// The device for this run, or nullopt after marking the run skipped.
inline std::optional<tg::Device> device_or_skip(benchmark::State& state, bool cuda) {
  if (!cuda) return tg::kCPU;
  if (!tg::cuda_is_available()) {
    state.SkipWithError("no CUDA device");
    return std::nullopt;
  }
  return tg::cuda_device(0);
}

// Waits for the device's queued work (nothing to do on the CPU).
inline void sync(tg::Device d) {
  if (d.is_cuda()) tg::cuda::synchronize(d.index);
}

}  // namespace bench
