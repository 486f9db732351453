// One rank of the multi-process fully_shard checks (started by tgrun from test_fsdp_processes; NCCL
// over GPUs, or the CPU backend on a machine without them):
//   fsdp_worker parity   a small GPT (blocks and root sharded, with and without checkpointing)
//                        against DistributedDataParallel with AdamW, each rank on its rows of every
//                        batch: the same losses and parameters.
//   fsdp_worker compiled the same, with the sharded model's loss under compile() (aot_eager on the
//                        CPU, cudagraphs on GPUs): compiled once, never recompiled nor run eagerly,
//                        its gathers and reduce-scatters nodes of the graphs.
//   fsdp_worker memory   one AdamW step of a GPT (GPT-2 small's shape on GPUs, a smaller one on the
//                        CPU) sharded and then under DDP: the bytes each rank keeps for parameters,
//                        gradients and optimizer state afterwards (the CUDA allocator's count on GPUs,
//                        the tensors' sizes on the CPU), and their ratio.
// Prints one line per check and exits non-zero on a mismatch.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <utility>

#include "distributed/fsdp/fsdp.h"
#include "tapegraph.h"
#include "tensor/cuda_runtime.h"
#include "tensor/memory/cuda_memory.h"

using namespace tg;

namespace {

constexpr int64_t kRows = 8;  // the whole batch, split over the ranks

std::shared_ptr<nn::GPT> make_gpt(const nn::GPTConfig& config, Device device) {
  manual_seed(0);
  auto gpt = std::make_shared<nn::GPT>(config);
  gpt->to(device);
  return gpt;
}

void shard(nn::GPT& gpt) {
  for (const auto& [_, m] : gpt.named_modules())
    if (m->type_name() == "GPTBlock") distributed::fully_shard(*m);
  distributed::fully_shard(gpt);
}

// This rank's rows of step `step`'s whole batch of token ids and targets, on `device`.
std::pair<Tensor, Tensor> local_batch(int step, int64_t vocab, int64_t tokens, Device device) {
  const int rank = distributed::rank(), world = distributed::world_size();
  manual_seed(1000 + static_cast<uint64_t>(step));
  Tensor x = randint(0, vocab, {kRows, tokens}), y = randint(0, vocab, {kRows, tokens});
  const int64_t n = kRows / world;
  return {x.narrow(0, rank * n, n).contiguous().to(device), y.narrow(0, rank * n, n).contiguous().to(device)};
}

Tensor lm_loss(nn::Module& m, const std::pair<Tensor, Tensor>& b, int64_t vocab) {
  return cross_entropy(m(b.first).reshape({-1, vocab}), b.second.reshape({-1}));
}

const optim::AdamOptions kAdam{.lr = 0.01, .weight_decay = 0.1};

// The largest difference between the sharded model's full parameters and DDP's. The key third of
// qkv.bias has an exactly zero gradient (the softmax ignores a shift shared by all keys); AdamW scales
// the rounding noise in its place to lr-sized steps, so it is left out.
double max_parameter_difference(nn::GPT& sharded, nn::DistributedDataParallel& ddp) {
  const auto full = distributed::full_state_dict(sharded);
  double worst = 0;
  for (const auto& [name, p] : ddp.module()->named_parameters()) {
    Tensor a = full.at(name).cpu(), b = p.detach().cpu();
    if (name.size() > 8 && name.compare(name.size() - 8, 8, "qkv.bias") == 0) {
      const int64_t d = a.size(0) / 3;
      a = cat({a.narrow(0, 0, d), a.narrow(0, 2 * d, d)});
      b = cat({b.narrow(0, 0, d), b.narrow(0, 2 * d, d)});
    }
    worst = std::max(worst, (a - b).abs().amax().item<double>());
  }
  return worst;
}

int count_of(const std::map<std::string, int>& ops, const std::string& name) {
  const auto it = ops.find(name);
  return it == ops.end() ? 0 : it->second;
}

// Compiled once and run compiled on every step, with each of the `units` gathered by a node of the
// forward graph and its gradient reduce-scattered by one of the backward's: what the counters say, and
// whether that holds.
std::pair<std::string, bool> compiled_once(const graphs::CompileCounters& c, int steps, int units) {
  const int gathers = count_of(c.forward_ops, "fsdp_all_gather") + count_of(c.forward_ops, "fsdp_regather");
  const int reduce_scatters = count_of(c.backward_ops, "reduce_scatter");
  const bool ok = c.compilations == 1 && c.recompiles == 0 && c.eager_fallbacks == 0 && c.compiled_calls == steps &&
                  gathers == units && reduce_scatters == units;
  std::string text = std::to_string(c.compilations) + " compilation(s), " + std::to_string(c.recompiles) +
                     " recompile(s), " + std::to_string(c.eager_fallbacks) + " eager fallback(s), " +
                     std::to_string(c.compiled_calls) + " compiled call(s), " + std::to_string(gathers) +
                     " gather(s) and " + std::to_string(reduce_scatters) + " reduce-scatter(s) in the graphs";
  if (!c.recompile_reasons.empty()) text += "; recompiled: " + c.recompile_reasons[0];
  if (!c.fallback_reasons.empty()) text += "; ran eagerly: " + c.fallback_reasons[0];
  return {text, ok};
}

// The small GPT sharded per block and at the root against DistributedDataParallel, with and without
// checkpointing, both with AdamW and each rank on its rows of every batch. With `compiled`, the sharded
// model's loss runs through compile() (aot_eager on the CPU, cudagraphs on GPUs); DDP stays eager.
int parity(bool compiled) {
  const Device device = distributed::default_group()->device();
  const int rank = distributed::rank();
  const std::string backend = device.is_cuda() ? "cudagraphs" : "aot_eager";
  const std::string label = compiled ? "compiled (" + backend + ") fsdp" : "fsdp";
  constexpr int kSteps = 5;
  int failures = 0;
  for (bool checkpoint : {false, true}) {
    const nn::GPTConfig config{.vocab_size = 64, .context = 16, .d_model = 32, .heads = 2, .layers = 3,
                               .checkpoint = checkpoint};
    auto ddp = std::make_shared<nn::DistributedDataParallel>(make_gpt(config, device));
    optim::AdamW ddp_opt(ddp->parameters(), kAdam);
    auto model = make_gpt(config, device);
    shard(*model);
    optim::AdamW opt(distributed::sharded_parameters(*model), kAdam);
    // Traced on its first call (none when eager).
    auto step = compile([&](const Tensor& x, const Tensor& y) { return lm_loss(*model, {x, y}, config.vocab_size); },
                        {.backend = backend});
    double worst_loss = 0;
    for (int s = 0; s < kSteps; ++s) {
      const auto batch = local_batch(s, config.vocab_size, config.context, device);
      ddp_opt.zero_grad();
      const Tensor ddp_loss = lm_loss(*ddp, batch, config.vocab_size);
      ddp_loss.backward();
      ddp_opt.step();
      opt.zero_grad();
      const Tensor loss = compiled ? step(batch.first, batch.second) : lm_loss(*model, batch, config.vocab_size);
      loss.backward();
      opt.step();
      worst_loss = std::max(worst_loss, std::abs(loss.item<double>() - ddp_loss.item<double>()));
    }
    const double worst = max_parameter_difference(*model, *ddp);
    const double tolerance = device.is_cuda() ? 1e-4 : 1e-5;
    bool ok = worst < tolerance && worst_loss < tolerance;
    std::string counters;
    if (compiled) {
      const auto [text, once] = compiled_once(step.counters(), kSteps, config.layers + 1);
      counters = ", " + text;
      ok = ok && once;
    }
    failures += ok ? 0 : 1;
    std::printf("rank %d %s %s: max |fsdp - ddp| = %.3g (parameters), %.3g (losses) over %d steps%s: %s\n", rank,
                label.c_str(), checkpoint ? "checkpointed" : "plain", worst, worst_loss, kSteps, counters.c_str(),
                ok ? "ok" : "MISMATCH");
  }
  return failures == 0 ? 0 : 1;
}

int64_t bytes_of(const Tensor& t) { return t.defined() ? t.numel() * static_cast<int64_t>(t.element_size()) : 0; }

// What a rank keeps after a step: the module's parameters (the sharded ones hold nothing), the shards,
// the gradients the optimizer reads and the optimizer's state. On GPUs the CUDA allocator's count since
// `base` instead (everything the step left behind).
int64_t kept_bytes(nn::GPT& gpt, bool sharded, const optim::Optimizer& opt, Device device, int64_t base) {
  if (device.is_cuda()) {
    cuda::synchronize(device.index);
    return cuda::memory_allocated(device.index) - base;
  }
  int64_t n = 0;
  for (const Tensor& p : gpt.parameters()) n += p.impl()->storage()->nbytes() > 0 ? bytes_of(p) : 0;
  for (const Tensor& p : opt.params()) n += (sharded ? bytes_of(p) : 0) + bytes_of(p.grad());
  for (const auto& [key, t] : opt.state_dict())
    if (key.rfind("state.", 0) == 0) n += bytes_of(t);
  return n;
}

int memory() {
  const Device device = distributed::default_group()->device();
  const int rank = distributed::rank();
  nn::GPTConfig config;  // GPT-2 small on GPUs
  if (!device.is_cuda()) config = {.vocab_size = 1024, .context = 64, .d_model = 128, .heads = 4, .layers = 4};
  const int64_t tokens = 64;
  const auto batch = local_batch(0, config.vocab_size, tokens, device);
  auto measure = [&](bool sharded) {
    const int64_t base = device.is_cuda() ? cuda::memory_allocated(device.index) : 0;
    int64_t kept = 0;
    {
      auto gpt = make_gpt(config, device);
      std::shared_ptr<nn::Module> model = gpt;
      if (sharded) {
        shard(*gpt);
      } else {
        model = std::make_shared<nn::DistributedDataParallel>(gpt);
      }
      optim::AdamW opt(sharded ? distributed::sharded_parameters(*gpt) : gpt->parameters(), kAdam);
      lm_loss(*model, batch, config.vocab_size).backward();
      opt.step();
      kept = kept_bytes(*gpt, sharded, opt, device, base);
    }
    return kept;
  };
  const int64_t fsdp = measure(true), ddp = measure(false);
  const double ratio = static_cast<double>(fsdp) / static_cast<double>(ddp);
  const bool ok = ratio <= 0.55;
  std::printf("rank %d fsdp-memory: fully_shard keeps %lld bytes, ddp %lld bytes, ratio %.4f: %s\n", rank,
              static_cast<long long>(fsdp), static_cast<long long>(ddp), ratio, ok ? "ok" : "MISMATCH");
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    distributed::init();
    const std::string what = argc > 1 ? argv[1] : "parity";
    int rc = 2;
    if (what == "parity") rc = parity(/*compiled=*/false);
    if (what == "compiled") rc = parity(/*compiled=*/true);
    if (what == "memory") rc = memory();
    std::fflush(stdout);
    distributed::destroy();
    return rc;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fsdp_worker: %s\n", e.what());
    return 1;
  }
}
