// Data-parallel training of nn::GPT (the model of bench_gpt2) in bf16 autocast, compiled (the loss
// and its backward, bucket reductions included, as CUDA graphs with cudagraphs; the AdamW update as
// one CompiledStep), in one of three modes:
//   single  the plain model on one rank (run it without tgrun, or with --nproc-per-node 1)
//   ddp     nn::DistributedDataParallel and AdamW on every rank
//   zero2   ZeroRedundancyOptimizer stage 2 over AdamW (optimizer state and gradients sharded)
// Run one process per GPU:
//   bench_ddp_gpt2 single    tgrun --nproc-per-node 2 bench_ddp_gpt2 ddp    ... bench_ddp_gpt2 zero2
// Weak scaling: every rank trains on its own fixed batch of TG_GPT2_BATCH x TG_GPT2_SEQ tokens (rank
// r's tokens drawn with seed 1000 + r, so rank 0's batch is the same in every mode), so tokens/s
// counts all ranks and DDP's is compared with `single`'s. Every rank prints ms/step, tokens/s, the
// peak device memory and its "state memory": the bytes of optimizer state and of gradients it holds
// between steps (summed over the tensors: the optimizer's state tensors on this rank, and the
// gradients of the parameters it steps). Rank 0 then prints the loss of every step, averaged over
// the ranks, so that the runs of ddp and zero2 can be compared line by line.
//
// Sizes: TG_GPT2_LAYERS (12), TG_GPT2_BATCH (8, per rank), TG_GPT2_SEQ (1024), TG_GPT2_D_MODEL (768),
// TG_GPT2_HEADS (12), TG_GPT2_VOCAB (50304); TG_DDP_STEPS (50) steps, of which the first
// TG_DDP_WARMUP (10) are not timed. DDP's buckets: TG_DDP_BUCKET_MB (25), TG_DDP_FIRST_BUCKET_MB (1),
// TG_DDP_LAST_BUCKET_MB (0: off) and TG_DDP_REDUCE_DTYPE (bf16, fp32 or unset: the gradients' dtype).
// Without CUDA devices the same program runs on the CPU backend, compiled with aot_eager (for a tiny
// model: the figures then only show that it works).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bench/support/capture_mode.h"
#include "distributed/collectives/collectives.h"
#include "distributed/ddp/ddp.h"
#include "distributed/zero/zero_optimizer.h"
#include "tapegraph.h"
#include "tensor/cuda_runtime.h"
#include "tensor/memory/cuda_memory.h"

namespace {

using tg::Tensor;
using Clock = std::chrono::steady_clock;

int64_t env_int(const char* name, int64_t fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::stoll(v) : fallback;
}

double env_double(const char* name, double fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::stod(v) : fallback;
}

std::optional<tg::DType> env_reduce_dtype() {
  const char* v = std::getenv("TG_DDP_REDUCE_DTYPE");
  const std::string s = v != nullptr ? v : "";
  if (s.empty()) return std::nullopt;
  if (s == "bf16" || s == "bfloat16") return tg::kBFloat16;
  if (s == "fp32" || s == "float32") return tg::kFloat32;
  TG_FAIL("[bench_ddp_gpt2] TG_DDP_REDUCE_DTYPE=", s, ": expected bf16, fp32 or nothing");
}

// GPT's loss as a module of one input, so that DistributedDataParallel's forward runs it: `xy`
// holds the token ids and the targets stacked, [B, 2, T].
class GptLoss : public tg::nn::Module {
 public:
  explicit GptLoss(std::shared_ptr<tg::nn::GPT> gpt) : gpt_(std::move(gpt)) { register_module("gpt", gpt_); }
  Tensor forward(const Tensor& xy) override {
    return gpt_->loss(xy.select(1, 0).contiguous(), xy.select(1, 1).contiguous());
  }
  std::string type_name() const override { return "GptLoss"; }

 private:
  std::shared_ptr<tg::nn::GPT> gpt_;
};

int64_t bytes_of(const Tensor& t) { return t.defined() ? t.numel() * t.element_size() : 0; }

// Bytes of the optimizer's state tensors ("state.*" entries of its state dict).
int64_t state_bytes(const tg::optim::Optimizer& opt) {
  int64_t n = 0;
  for (const auto& [key, t] : opt.state_dict())
    if (key.rfind("state.", 0) == 0) n += bytes_of(t);
  return n;
}

double mib(int64_t bytes) { return static_cast<double>(bytes) / (1 << 20); }

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "ddp";
  if (mode != "single" && mode != "ddp" && mode != "zero2") {
    std::fprintf(stderr, "usage: bench_ddp_gpt2 single|ddp|zero2 (got %s)\n", mode.c_str());
    return 2;
  }
  tg::distributed::init();
  auto group = tg::distributed::default_group();
  const int rank = group->rank(), world = group->world_size();
  if (mode == "single" && world != 1) {
    if (rank == 0) std::fprintf(stderr, "bench_ddp_gpt2: mode single runs on one rank, got %d\n", world);
    tg::distributed::destroy();
    return 2;
  }
  const tg::Device dev = group->device();
  const bool cuda = dev.is_cuda();

  const tg::nn::GPTConfig config{.vocab_size = env_int("TG_GPT2_VOCAB", 50304),
                                 .context = env_int("TG_GPT2_SEQ", 1024),
                                 .d_model = env_int("TG_GPT2_D_MODEL", 768),
                                 .heads = env_int("TG_GPT2_HEADS", 12),
                                 .layers = env_int("TG_GPT2_LAYERS", 12)};
  const int64_t batch = env_int("TG_GPT2_BATCH", 8), seq = config.context;
  const int steps = static_cast<int>(env_int("TG_DDP_STEPS", 50));
  const int warmup = static_cast<int>(env_int("TG_DDP_WARMUP", 10));
  TG_CHECK(steps > warmup && warmup >= 1, "[bench_ddp_gpt2] TG_DDP_STEPS ", steps, " and TG_DDP_WARMUP ", warmup,
           ": expected 1 <= warmup < steps");

  tg::manual_seed(0);  // the same initial model everywhere (DDP and ZeRO broadcast rank 0's anyway)
  auto gpt = std::make_shared<tg::nn::GPT>(config);
  gpt->to(dev);
  std::shared_ptr<tg::nn::Module> model = std::make_shared<GptLoss>(gpt);
  const tg::optim::AdamOptions adamw{.lr = 3e-4, .weight_decay = 0.1};
  std::unique_ptr<tg::optim::Optimizer> opt;
  tg::distributed::ZeroRedundancyOptimizer* zero = nullptr;
  if (mode == "zero2") {
    auto z = std::make_unique<tg::distributed::ZeroRedundancyOptimizer>(
        model->parameters(), tg::distributed::optimizer_class<tg::optim::AdamW>(adamw),
        tg::distributed::ZeroOptions{.stage = 2});
    zero = z.get();
    opt = std::move(z);
  } else {
    if (mode == "ddp") {
      const tg::nn::DistributedDataParallelOptions ddp{
          .bucket_cap_mb = env_double("TG_DDP_BUCKET_MB", 25.0),
          .first_bucket_cap_mb = env_double("TG_DDP_FIRST_BUCKET_MB", 1.0),
          .last_bucket_cap_mb = env_double("TG_DDP_LAST_BUCKET_MB", 0.0),
          .reduce_dtype = env_reduce_dtype()};
      model = std::make_shared<tg::nn::DistributedDataParallel>(model, ddp);
    }
    opt = std::make_unique<tg::optim::AdamW>(model->parameters(), adamw);
  }

  // This rank's fixed batch: ids and next-token targets stacked, [B, 2, T].
  tg::manual_seed(1000 + static_cast<uint64_t>(rank));
  const Tensor tokens = tg::randint(0, config.vocab_size, {batch, seq + 1}, {.device = dev});
  Tensor xy = tg::stack({tokens.narrow(1, 0, seq), tokens.narrow(1, 1, seq)}, 1).contiguous();

  auto loss = [model](const Tensor& in) {
    tg::AutocastGuard autocast(in.device(), tg::kBFloat16);
    return model->forward(in);
  };
  const std::string backend = cuda ? "cudagraphs" : "aot_eager";
  const tg::CompileOptions options = bench::capture_mode({.backend = backend});
  if (cuda) tg::mark_static_address(xy);
  opt->set_capturable(true);
  tg::Compiled<decltype(loss)> compiled(loss, options);
  tg::optim::CompiledStep update(*opt, options);

  int64_t params = 0;
  for (const Tensor& p : gpt->parameters()) params += p.numel();
  if (rank == 0)
    std::printf("bench_ddp_gpt2 %s: %d rank(s) on %s (%s backend, %s), GPT %lld layers, d_model %lld, %lld heads, "
                "vocab %lld, %.1fM parameters; batch %lld x %lld tokens per rank, bf16 autocast, AdamW, %d steps "
                "(%d timed)\n",
                mode.c_str(), world, cuda ? "CUDA" : "CPU", group->backend().c_str(), backend.c_str(),
                static_cast<long long>(config.layers), static_cast<long long>(config.d_model),
                static_cast<long long>(config.heads), static_cast<long long>(config.vocab_size), params / 1e6,
                static_cast<long long>(batch), static_cast<long long>(seq), steps, steps - warmup);
  if (rank == 0 && mode == "ddp") {
    const auto buckets = std::static_pointer_cast<tg::nn::DistributedDataParallel>(model)->bucket_names();
    std::string last;
    for (size_t i = 0; i < buckets.back().size() && i < 4; ++i) last += (i == 0 ? "" : ", ") + buckets.back()[i];
    if (buckets.back().size() > 4) last += ", ... (" + std::to_string(buckets.back().size()) + " parameters)";
    std::printf("ddp: %zu buckets, reduce dtype %s; the last one reduced: %s\n", buckets.size(),
                env_reduce_dtype() ? std::string(tg::dtype_name(*env_reduce_dtype())).c_str() : "the gradients'",
                last.c_str());
  }
  std::fflush(stdout);

  if (cuda) {
    tg::cuda::synchronize(dev.index);
    tg::cuda::reset_peak_memory_stats(dev.index);
  }
  tg::TensorList losses;
  Clock::time_point start;
  for (int s = 0; s < steps; ++s) {
    if (s == warmup) {  // everything traced, compiled and recorded: time from here
      if (cuda) tg::cuda::synchronize(dev.index);
      group->barrier("bench_ddp_gpt2.timed");
      start = Clock::now();
    }
    Tensor l = compiled(xy);
    opt->zero_grad();
    l.backward();
    update.step();
    losses.push_back(l.detach().clone());  // a replay overwrites the graph's output
  }
  if (cuda) tg::cuda::synchronize(dev.index);
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  const int timed = steps - warmup;

  // What stays allocated between steps for the optimizer: its state and the gradients it reads.
  int64_t grad_bytes = 0;
  for (const Tensor& p : opt->params()) grad_bytes += bytes_of(p.grad());
  if (zero != nullptr)  // stage 2 drops the full gradients; any left would count
    for (const Tensor& p : zero->model_params()) grad_bytes += bytes_of(p.grad());
  const int64_t opt_bytes = state_bytes(zero != nullptr ? zero->optimizer() : *opt);
  const double ms_per_step = seconds * 1e3 / timed;
  const double tokens_per_s = static_cast<double>(batch * seq * world) * timed / seconds;

  for (int r = 0; r < world; ++r) {  // one rank at a time
    if (r == rank) {
      std::printf("rank %d: %.2f ms/step, %.0f tokens/s (all ranks), peak %s, state %.3f MiB (optimizer %.3f MiB + "
                  "gradients %.3f MiB)\n",
                  rank, ms_per_step, tokens_per_s,
                  cuda ? (std::to_string(static_cast<long long>(mib(tg::cuda::max_memory_allocated(dev.index)))) +
                          " MiB").c_str()
                       : "n/a (CPU)",
                  mib(opt_bytes + grad_bytes), mib(opt_bytes), mib(grad_bytes));
      std::fflush(stdout);
    }
    group->barrier("bench_ddp_gpt2.report." + std::to_string(r));
  }

  // The loss of every step averaged over the ranks (one collective, after the timed steps).
  Tensor all = tg::stack(losses, 0).to(tg::kFloat32);
  tg::distributed::all_reduce_(all, tg::distributed::ReduceOp::Avg, group);
  const Tensor host = all.to(tg::kCPU);
  if (rank == 0) {
    for (int s = 0; s < steps; ++s) std::printf("loss step %2d: %.6f\n", s + 1, host[s].item<double>());
    const auto& lc = compiled.counters();
    const auto& uc = update.counters();
    // DDP's buckets average with bucket_average, ZeRO stage 2's reduce-scatter.
    const char* reduction = zero != nullptr ? "reduce_scatter" : "bucket_average";
    const int in_graph = lc.backward_ops.count(reduction) ? lc.backward_ops.at(reduction) : 0;
    std::printf("compiled: loss %d compilation(s), %d compiled call(s), %d eager fallback(s), %d bucket "
                "reduction(s) in its backward graph%s; update %d compilation(s), %d compiled call(s)\n",
                lc.compilations, lc.compiled_calls, lc.eager_fallbacks, in_graph,
                zero != nullptr ? " (stage 2: reduce-scatters)" : "", uc.compilations, uc.compiled_calls);
    std::printf("summary %s: world %d, %.2f ms/step, %.0f tokens/s, state %lld bytes on rank 0, final loss %.6f\n",
                mode.c_str(), world, ms_per_step, tokens_per_s, static_cast<long long>(opt_bytes + grad_bytes),
                host[steps - 1].item<double>());
  }
  std::fflush(stdout);
  group->barrier("bench_ddp_gpt2.end");
  tg::distributed::destroy();
  return 0;
}
