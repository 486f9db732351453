// Memory bandwidth of an elementwise add on 64M floats (256 MiB per tensor): two reads and one
// write per element, so GB/s = 3 * 4 * N bytes / time.
#include <benchmark/benchmark.h>

#include <optional>

#include "bench/support/devices.h"
#include "tapegraph.h"
#include "tensor/cuda_runtime.h"

namespace {

constexpr int64_t kN = int64_t{64} << 20;

using bench::device_or_skip;
using bench::sync;

void set_bandwidth(benchmark::State& state) {
  const double bytes = 3.0 * 4.0 * static_cast<double>(kN) * static_cast<double>(state.iterations());
  // Printed as "bandwidth=12.3G/s" (decimal units: GB/s).
  state.counters["bandwidth"] = benchmark::Counter(bytes, benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
}

// c = a + b: includes allocating c (the caching allocator reuses the block on CUDA).
void BM_add_64M(benchmark::State& state, bool cuda) {
  const auto dev = device_or_skip(state, cuda);
  if (!dev) return;
  const tg::Tensor a = tg::rand({kN}, {.device = *dev});
  const tg::Tensor b = tg::rand({kN}, {.device = *dev});
  tg::Tensor c = a + b;
  sync(*dev);
  for (auto _ : state) {
    c = tg::Tensor();  // release the previous result first, as a loop reusing memory would
    c = a + b;
    sync(*dev);
  }
  set_bandwidth(state);
}

// a += b: the same traffic with no allocation.
void BM_add_inplace_64M(benchmark::State& state, bool cuda) {
  const auto dev = device_or_skip(state, cuda);
  if (!dev) return;
  tg::Tensor a = tg::zeros({kN}, {.device = *dev});
  const tg::Tensor b = tg::rand({kN}, {.device = *dev});
  a.add_(b);
  sync(*dev);
  for (auto _ : state) {
    a.add_(b);
    sync(*dev);
  }
  set_bandwidth(state);
}

BENCHMARK_CAPTURE(BM_add_64M, cpu, false)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_add_64M, cuda, true)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_add_inplace_64M, cpu, false)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_add_inplace_64M, cuda, true)->UseRealTime()->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
