// gpt2: a GPT-2-shaped language model's training step (nn::GPT: vocab 50304, d_model 768, 12 heads,
// 12 layers; batch 8 of 1024 tokens; AdamW lr 3e-4, weight decay 0.1), the twin of the anchors'
// pt_gpt2.py: eager and compiled (the loss as CUDA graphs with cudagraphs, the update as one
// CompiledStep), fp32 (TF32 off) and bf16 autocast. Reports ms and tokens per second, model FLOPs
// utilization (6N + 12 L d T FLOPs per token, N without the embeddings, against the dense peak)
// and peak device memory.
// BM_gpt2_plain_step is the same model written with plain ops only, for the compiler to fuse.
// TG_GPT2_LAYERS, TG_GPT2_BATCH and TG_GPT2_SEQ change the size; TG_GPT2_CHECKPOINT=1 runs each
// block through tg::checkpoint; TG_GPT2_GRAD_EPILOGUES=1 compiles with fuse_gradient_epilogues (bias
// gradients in the weight-gradient products' epilogues), TG_GPT2_FLOAT32_GRADS=1 with
// float32_parameter_gradients (weight gradients written in float32 by their products). activation_MiB is the peak of one step minus what was allocated
// before its forward (parameters, gradients, optimizer state), for either setting.
//
// Time to first replay (see Note [Warm start] in docs/warm_start.md): compiled runs report
// first_replay_s, the wall time from building the model to the end of the first step that only
// replays CUDA graphs (everything traced, compiled, tuned and recorded). TG_GPT2_FIRST_REPLAY=bf16
// (or 1; or fp32) runs nothing else: one compiled setup, steps up to that first replay, and a line
// with the time since the process started, which a second run with the same TG_CACHE_DIR compares.
//
// TG_GPT2_PROFILE=N profiles N steps with tg::profiler (the table, the device time per stage and
// the memory summary; TG_GPT2_TRACE=PATH writes the Chrome trace), beside bench/pt/gpt2.py --profile.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <unistd.h>

#include "bench/support/capture_mode.h"
#include "bench/support/step_timing.h"
#include "graphs/counters.h"
#include "ops/core/disk_cache.h"
#include "profiler/profiler.h"
#include "profiler/stages.h"
#include "tapegraph.h"
#include "tensor/cuda_runtime.h"
#include "tensor/memory/cuda_memory.h"

namespace {

using tg::Tensor;

int64_t env_int(const char* name, int64_t fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::stoll(v) : fallback;
}

// Dense peak FLOP/s of an H100/H200 SXM: bf16 tensor cores, and float32 without TF32.
constexpr double kPeakBf16 = 989e12, kPeakFp32 = 67e12;

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// The model, its optimizer and one batch, eager or compiled, and the training step.
struct Gpt2Step {
  int64_t layers = env_int("TG_GPT2_LAYERS", 12), batch = env_int("TG_GPT2_BATCH", 8), seq = env_int("TG_GPT2_SEQ", 1024);
  bool checkpoint = env_int("TG_GPT2_CHECKPOINT", 0) != 0;
  std::shared_ptr<tg::nn::GPT> model;
  std::unique_ptr<tg::optim::AdamW> opt;
  Tensor x, y, last;
  std::function<Tensor(const Tensor&, const Tensor&)> f;
  std::unique_ptr<tg::optim::CompiledStep> update;

  Gpt2Step(bool compiled, bool bf16, bool plain = false) {
    const tg::Device dev = tg::cuda_device(0);
    tg::manual_seed(0);
    model = std::make_shared<tg::nn::GPT>(
        tg::nn::GPTConfig{.context = seq, .layers = layers, .checkpoint = checkpoint, .fused_ops = !plain});
    model->to(dev);
    opt = std::make_unique<tg::optim::AdamW>(model->parameters(), tg::optim::AdamOptions{.lr = 3e-4, .weight_decay = 0.1});
    const Tensor tokens = tg::randint(0, model->config().vocab_size, {batch, seq + 1}, {.device = dev});
    x = tokens.narrow(1, 0, seq).contiguous();
    y = tokens.narrow(1, 1, seq).contiguous();
    auto loss = [m = model, bf16](const Tensor& a, const Tensor& b) {
      tg::AutocastGuard autocast(a.device(), tg::kBFloat16, bf16);
      return m->loss(a, b);
    };
    f = loss;
    if (compiled) {
      tg::mark_static_address(x);
      tg::mark_static_address(y);
      opt->set_capturable(true);
      const tg::CompileOptions options = bench::capture_mode(
          {.backend = "cudagraphs",
           .float32_parameter_gradients = env_int("TG_GPT2_FLOAT32_GRADS", 0) != 0,
           .fuse_gradient_epilogues = env_int("TG_GPT2_GRAD_EPILOGUES", 0) != 0});
      auto c = std::make_shared<tg::Compiled<decltype(loss)>>(loss, options);
      f = [c](const Tensor& a, const Tensor& b) { return (*c)(a, b); };
      update = std::make_unique<tg::optim::CompiledStep>(*opt, options);
    }
  }

  void step() {
    last = f(x, y);
    opt->zero_grad();
    last.backward();
    if (update) update->step();
    else opt->step();
  }

  // Runs steps, each waited for, until one compiles, warms up and records nothing but replays
  // graphs (at most `limit`). Returns how many ran, the last being that one (limit + 1 if none was).
  int steps_to_first_replay(int limit) {
    for (int i = 1; i <= limit; ++i) {
      const tg::graphs::CompileCounters before = tg::graphs::global_counters();
      step();
      tg::cuda::synchronize();
      const tg::graphs::CompileCounters after = tg::graphs::global_counters();
      if (after.compilations == before.compilations && after.warmups == before.warmups &&
          after.graphs_captured == before.graphs_captured && after.replays > before.replays)
        return i;
    }
    return limit + 1;
  }
};

void run(benchmark::State& state, bool compiled, bool bf16, bool plain = false) {
  if (!tg::cuda_is_available()) {
    state.SkipWithError("no CUDA device");
    return;
  }
  tg::cuda::empty_cache();
  tg::cuda::reset_peak_memory_stats();
  bool checkpoint = false;
  try {
    const Clock::time_point start = Clock::now();
    Gpt2Step s(compiled, bf16, plain);
    const std::shared_ptr<tg::nn::GPT>& model = s.model;
    const int64_t layers = s.layers, batch = s.batch, seq = s.seq;
    checkpoint = s.checkpoint;
    Tensor& last = s.last;
    auto step = [&s] { s.step(); };
    // Warm-up, tracing, recording: 5 steps, the compiled ones waited for until the first replay.
    int warm = 0;
    if (compiled) {
      warm = s.steps_to_first_replay(5);
      if (warm <= 5) state.counters["first_replay_s"] = seconds_since(start);
    }
    for (int i = warm; i < 5; ++i) step();
    tg::cuda::synchronize();
    bench::time_steps(state, step, 5);
    // Model FLOPs as PaLM's appendix B counts them: 6 per parameter that multiplies a matrix (the
    // embeddings' lookups are not products; the LM head is) and 12 * layers * d_model * seq for
    // attention, per token.
    int64_t params = 0;
    for (const auto& [name, p] : model->named_parameters())
      if (name.rfind("wte.", 0) != 0 && name.rfind("wpe.", 0) != 0) params += p.numel();
    const double tokens_per_step = static_cast<double>(batch * seq);
    const double flops_per_token =
        6.0 * static_cast<double>(params) + 12.0 * static_cast<double>(layers * model->config().d_model * seq);
    state.counters["tokens_per_s"] = benchmark::Counter(tokens_per_step * 5, benchmark::Counter::kIsIterationInvariantRate);
    state.counters["mfu"] = benchmark::Counter(tokens_per_step * 5 * flops_per_token / (bf16 ? kPeakBf16 : kPeakFp32),
                                               benchmark::Counter::kIsIterationInvariantRate);
    state.counters["peak_MiB"] = static_cast<double>(tg::cuda::max_memory_allocated()) / (1 << 20);
    // One more step, measured alone. Memory a backend keeps between steps (the cudagraphs backend's
    // graph pools) is already in `held`, so this counts what the step allocates beyond it.
    tg::cuda::synchronize();
    const int64_t held = tg::cuda::memory_allocated();
    tg::cuda::reset_peak_memory_stats();
    step();
    tg::cuda::synchronize();
    state.counters["activation_MiB"] = static_cast<double>(tg::cuda::max_memory_allocated() - held) / (1 << 20);
    state.counters["loss"] = last.item<double>();
  } catch (const tg::Error& e) {  // reported as this benchmark's error; the others still run
    state.SkipWithError(e.what());
    return;
  }
  state.SetLabel(std::string(compiled ? "compiled" : "eager") + (bf16 ? ", bf16 autocast" : ", fp32") +
                 (checkpoint ? ", checkpoint" : "") + (plain ? ", plain ops" : ""));
}

// Seconds since this process started (/proc/self/stat's start time against the boot-time clock), or
// -1 where that cannot be read.
double seconds_since_process_start() {
  std::ifstream stat("/proc/self/stat");
  std::string line;
  if (!std::getline(stat, line)) return -1;
  std::istringstream fields(line.substr(line.rfind(')') + 2));  // after the command name
  std::string field;
  for (int i = 3; i <= 22 && fields >> field; ++i) {}  // field 22: start time in clock ticks since boot
  timespec now{};
  if (field.empty() || clock_gettime(CLOCK_BOOTTIME, &now) != 0) return -1;
  const double s = static_cast<double>(now.tv_sec) + now.tv_nsec * 1e-9 -
                   std::stod(field) / static_cast<double>(sysconf(_SC_CLK_TCK));
  return s >= 0 && s < 3600 ? s : -1;  // a clock of another namespace: unknown
}

// TG_GPT2_FIRST_REPLAY: one compiled setup, steps up to the first replay, a line of timings and one
// of the cache's counters (in total, then hits/misses/rejected/stored per kind).
int first_replay_only(const std::string& mode) {
  const double before_main = seconds_since_process_start();  // loading the program and its libraries
  const Clock::time_point main_start = Clock::now();
  if (!tg::cuda_is_available()) {
    std::fprintf(stderr, "bench_gpt2: no CUDA device\n");
    return 1;
  }
  tg::cuda::synchronize();  // the context exists from here on
  const double init_s = seconds_since(main_start);
  const Clock::time_point setup_start = Clock::now();
  Gpt2Step s(/*compiled=*/true, /*bf16=*/mode != "fp32");
  tg::cuda::synchronize();
  const double setup_s = seconds_since(setup_start);
  const Clock::time_point steps_start = Clock::now();
  const int steps = s.steps_to_first_replay(10);
  const double steps_s = seconds_since(steps_start), main_s = seconds_since(main_start);
  const tg::DiskCacheStats c = tg::disk_cache_stats();
  const std::string dir = tg::disk_cache_dir();
  std::printf("time to first replay (%s, %lld layers, batch %lld x %lld): %.3f s since the process started "
              "(%.3f s before main; in main: CUDA context %.3f s, model and optimizer %.3f s, %d step(s) %.3f s)%s\n",
              mode == "fp32" ? "fp32" : "bf16 autocast", static_cast<long long>(s.layers),
              static_cast<long long>(s.batch), static_cast<long long>(s.seq),
              before_main >= 0 ? before_main + main_s : main_s, before_main >= 0 ? before_main : 0.0, init_s, setup_s,
              steps, steps_s, steps > 10 ? " (no step replayed only; gave up after 10)" : "");
  std::printf("on-disk cache %s: %lld hits, %lld misses, %lld rejected, %lld stored",
              dir.empty() ? "off" : dir.c_str(), static_cast<long long>(c.hits), static_cast<long long>(c.misses),
              static_cast<long long>(c.rejected), static_cast<long long>(c.stores));
  for (const auto& [kind, k] : tg::disk_cache_stats_by_kind())
    std::printf("; %s %lld/%lld/%lld/%lld", kind.c_str(), static_cast<long long>(k.hits),
                static_cast<long long>(k.misses), static_cast<long long>(k.rejected), static_cast<long long>(k.stores));
  std::printf("\n");
  return steps > 10 ? 1 : 0;
}

// TG_GPT2_PROFILE=N: the compiled bf16 step (TG_GPT2_PROFILE_MODE=eager|fp32 for the others) under
// tg::profiler: recording from the first step, so that every CUDA graph node is named by the op
// that recorded it; five warm-up steps dropped, then N steps. Prints the table of ops and kernels,
// the device time per stage and the memory summary; writes the Chrome trace to TG_GPT2_TRACE.
int profile_only(int steps) {
  if (!tg::cuda_is_available()) {
    std::fprintf(stderr, "bench_gpt2: no CUDA device\n");
    return 1;
  }
  const char* mode_env = std::getenv("TG_GPT2_PROFILE_MODE");
  const std::string mode = mode_env != nullptr ? mode_env : "";
  Gpt2Step s(/*compiled=*/mode != "eager", /*bf16=*/mode != "fp32");
  tg::profiler::Profiler prof;
  prof.start();
  for (int i = 0; i < 5; ++i) s.step();
  tg::cuda::synchronize();
  prof.reset();
  for (int i = 0; i < steps; ++i) s.step();
  const tg::profiler::Profile& p = prof.stop();
  std::printf("GPT-2 step (%s, %lld layers, batch %lld x %lld), %d profiled steps\n",
              mode.empty() ? "compiled, bf16 autocast" : mode.c_str(), static_cast<long long>(s.layers),
              static_cast<long long>(s.batch), static_cast<long long>(s.seq), steps);
  if (!p.device_note().empty()) std::printf("no device activity: %s\n", p.device_note().c_str());
  std::printf("%s\n", p.table({.row_limit = 40}).c_str());
  std::printf("device time by stage:\n%s\n",
              tg::profiler::stage_table(tg::profiler::stage_breakdown(p), steps).c_str());
  std::printf("%s", tg::profiler::memory_summary().c_str());
  if (const char* trace = std::getenv("TG_GPT2_TRACE"); trace != nullptr && *trace != '\0') {
    p.export_chrome_trace(trace);
    std::printf("trace: %s\n", trace);
  }
  return 0;
}

// range(0): 0 eager, 1 compiled; range(1): 0 fp32, 1 bf16.
void BM_gpt2_step(benchmark::State& state) { run(state, state.range(0) != 0, state.range(1) != 0); }
BENCHMARK(BM_gpt2_step)
    ->ArgsProduct({{0, 1}, {1, 0}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(4);

// The same model written with plain ops (GPTConfig::fused_ops = false: layer_norm of the residual
// sum, lm_head then cross_entropy), bf16 autocast; range(0): 0 eager, 1 compiled. Compiled, the
// compiler's rewrites should bring it to BM_gpt2_step/1/1.
void BM_gpt2_plain_step(benchmark::State& state) { run(state, state.range(0) != 0, true, true); }
BENCHMARK(BM_gpt2_plain_step)->Arg(1)->Arg(0)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(4);

}  // namespace

int main(int argc, char** argv) {
  if (const int64_t n = env_int("TG_GPT2_PROFILE", 0); n > 0) return profile_only(static_cast<int>(n));
  const char* first = std::getenv("TG_GPT2_FIRST_REPLAY");
  if (first != nullptr && *first != '\0' && std::string(first) != "0")
    return first_replay_only(std::string(first) == "fp32" ? "fp32" : "bf16");
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
