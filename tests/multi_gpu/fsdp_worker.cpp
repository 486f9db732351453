// One rank of the multi-process fully_shard checks (started by tgrun from test_fsdp_processes; NCCL
// over GPUs, or the CPU backend on a machine without them):
//   fsdp_worker parity   a small GPT (blocks and root sharded, with and without checkpointing)
//                        against DistributedDataParallel with AdamW, each rank on its rows of every
//                        batch: the same losses and parameters.
//   fsdp_worker memory   one AdamW step of a GPT (GPT-2 small's shape on GPUs, a smaller one on the
//                        CPU) sharded and then under DDP: the bytes each rank keeps for parameters,
//                        gradients and optimizer state afterwards (the CUDA allocator's count on GPUs,
//                        the tensors' sizes on the CPU), and their ratio.
// Prints one line per check and exits non-zero on a mismatch.
#include <cmath>
#include <cstdio>
#include <string>

#include "distributed/fsdp.h"
#include "tapegraph.h"
#include "tensor/cuda_memory.h"
#include "tensor/cuda_runtime.h"

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

int parity() {
  const Device device = distributed::default_group()->device();
  const int rank = distributed::rank();
  int failures = 0;
  for (bool checkpoint : {false, true}) {
    const nn::GPTConfig config{.vocab_size = 64, .context = 16, .d_model = 32, .heads = 2, .layers = 3,
                               .checkpoint = checkpoint};
    auto ddp = std::make_shared<nn::DistributedDataParallel>(make_gpt(config, device));
    optim::AdamW ddp_opt(ddp->parameters(), kAdam);
    auto model = make_gpt(config, device);
    shard(*model);
    optim::AdamW opt(distributed::sharded_parameters(*model), kAdam);
    double worst_loss = 0;
    for (int s = 0; s < 5; ++s) {
      const auto batch = local_batch(s, config.vocab_size, config.context, device);
      ddp_opt.zero_grad();
      const Tensor ddp_loss = lm_loss(*ddp, batch, config.vocab_size);
      ddp_loss.backward();
      ddp_opt.step();
      opt.zero_grad();
      const Tensor loss = lm_loss(*model, batch, config.vocab_size);
      loss.backward();
      opt.step();
      worst_loss = std::max(worst_loss, std::abs(loss.item<double>() - ddp_loss.item<double>()));
    }
    // The key third of qkv.bias has an exactly zero gradient (the softmax ignores a shift shared by all
    // keys); AdamW scales the rounding noise in its place to lr-sized steps, so it is left out.
    const auto full = distributed::full_state_dict(*model);
    double worst = 0;
    for (const auto& [name, p] : ddp->module()->named_parameters()) {
      Tensor a = full.at(name).cpu(), b = p.detach().cpu();
      if (name.size() > 8 && name.compare(name.size() - 8, 8, "qkv.bias") == 0) {
        const int64_t d = a.size(0) / 3;
        a = cat({a.narrow(0, 0, d), a.narrow(0, 2 * d, d)});
        b = cat({b.narrow(0, 0, d), b.narrow(0, 2 * d, d)});
      }
      worst = std::max(worst, (a - b).abs().amax().item<double>());
    }
    const double tolerance = device.is_cuda() ? 1e-4 : 1e-5;
    const bool ok = worst < tolerance && worst_loss < tolerance;
    failures += ok ? 0 : 1;
    std::printf("rank %d fsdp %s: max |fsdp - ddp| = %.3g (parameters), %.3g (losses) over 5 steps: %s\n", rank,
                checkpoint ? "checkpointed" : "plain", worst, worst_loss, ok ? "ok" : "MISMATCH");
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
    if (what == "parity") rc = parity();
    if (what == "memory") rc = memory();
    std::fflush(stdout);
    distributed::destroy();
    return rc;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fsdp_worker: %s\n", e.what());
    return 1;
  }
}
