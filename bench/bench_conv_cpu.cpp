// The convolutions of resnet_tiny (batch 16 here) on the CPU, forward and both backward products,
// through oneDNN (when built with it) and through im2col + GEMM: the measurement that picks the
// default float32 CPU path. One thread for both (run with OMP_NUM_THREADS=1 for oneDNN).
#include <benchmark/benchmark.h>

#include "ops/conv/conv_kernels.h"
#include "tapegraph.h"

namespace {

struct Layer {
  int64_t cin, cout, k, stride, pad, hw;
};

// conv1, the four blocks' 3x3 convs (one strided) and the 1x1 strided shortcut.
const Layer kLayers[] = {{3, 32, 3, 1, 1, 32},  {32, 32, 3, 1, 1, 32}, {32, 32, 3, 1, 1, 32}, {32, 32, 3, 1, 1, 32},
                         {32, 32, 3, 1, 1, 32}, {32, 64, 3, 2, 1, 32}, {64, 64, 3, 1, 1, 16}, {32, 64, 1, 2, 0, 32},
                         {64, 64, 3, 1, 1, 16}, {64, 64, 3, 1, 1, 16}};

void BM_resnet_tiny_convs_cpu(benchmark::State& state) {
  const bool onednn = state.range(0) != 0;
  if (onednn && !tg::cpu_conv_onednn_available()) {
    state.SkipWithError("built without oneDNN");
    return;
  }
  tg::set_cpu_conv_onednn(onednn);
  tg::manual_seed(0);
  std::vector<std::tuple<tg::Tensor, tg::Tensor, tg::Tensor, tg::Conv2dParams>> work;
  for (const Layer& l : kLayers) {
    tg::Conv2dParams p;
    p.stride = {l.stride, l.stride};
    p.padding = {l.pad, l.pad};
    tg::Tensor x = tg::randn({16, l.cin, l.hw, l.hw}), w = tg::randn({l.cout, l.cin, l.k, l.k});
    tg::Tensor y = tg::conv2d(x, w, tg::Tensor(), {l.stride}, l.pad);
    work.emplace_back(x, w, y, p);
  }
  for (auto _ : state) {
    for (auto& [x, w, y, p] : work) {
      benchmark::DoNotOptimize(tg::conv2d(x, w, tg::Tensor(), {p.stride[0]}, p.padding[0]));
      benchmark::DoNotOptimize(tg::conv2d_backward_input(y, w, x.sizes(), p));
      benchmark::DoNotOptimize(tg::conv2d_backward_weight(y, x, w.sizes(), p));
    }
  }
  tg::set_cpu_conv_onednn(false);
  state.SetLabel(onednn ? "oneDNN" : "im2col + GEMM");
}
BENCHMARK(BM_resnet_tiny_convs_cpu)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
