// One rank of the multi-process ZeroRedundancyOptimizer checks (started by tgrun from
// test_zero_processes; NCCL over GPUs, or the CPU backend on a machine without them):
//   zero_worker parity            stages 1 and 2, eager and compiled (cudagraphs on GPUs, aot_eager on
//                                 the CPU): parameters equal DistributedDataParallel with AdamW and
//                                 clipping, each rank on its rows of every batch.
//   zero_worker save DIR STAGE    13 steps, a sharded checkpoint (and the model) in DIR after step 2;
//                                 rank 0 prints the whole batch's loss of steps 3..12.
//   zero_worker resume DIR STAGE  loads DIR and trains steps 3..12, printing the same losses.
//   zero_worker hang AT           stage 2, eager; rank 1 stops calling collectives at step AT (it
//                                 sleeps for a minute): rank 0 must fail naming the reduce-scatter
//                                 bucket and the step it waited in.
// Prints one line per check ("zero-loss STEP VALUE" for losses) and exits non-zero on a mismatch.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "distributed/zero/zero_optimizer.h"
#include "tapegraph.h"

using namespace tg;

namespace {

constexpr int64_t kRows = 32;  // the whole batch, split over the ranks
constexpr int kSteps = 13;

std::shared_ptr<nn::Sequential> make_mlp(Device device) {
  manual_seed(0);
  auto m = std::make_shared<nn::Sequential>();
  m->push_back(std::make_shared<nn::Linear>(16, 64));
  m->push_back(std::make_shared<nn::ReLU>());
  m->push_back(std::make_shared<nn::Linear>(64, 64));
  m->push_back(std::make_shared<nn::ReLU>());
  m->push_back(std::make_shared<nn::Linear>(64, 8));
  m->to(device);
  return m;
}

// This rank's rows of step `step`'s whole batch (the same on every rank), on `device`.
std::pair<Tensor, Tensor> local_batch(int step, int rank, int world, Device device) {
  manual_seed(1000 + static_cast<uint64_t>(step));
  Tensor x = randn({kRows, 16}), y = randint(0, 8, {kRows});
  const int64_t n = kRows / world;
  return {x.narrow(0, rank * n, n).contiguous().to(device), y.narrow(0, rank * n, n).contiguous().to(device)};
}

double max_abs_diff(const TensorList& a, const TensorList& b) {
  double worst = 0;
  for (size_t k = 0; k < a.size(); ++k)
    worst = std::max(worst, (a[k].detach().cpu() - b[k].detach().cpu()).abs().amax().item<double>());
  return worst;
}

const optim::AdamOptions kAdam{.lr = 0.01, .weight_decay = 0.05};
constexpr double kMaxNorm = 0.5;

int parity() {
  auto group = distributed::default_group();
  const int rank = group->rank(), world = group->world_size();
  const Device device = group->device();
  const std::string backend = device.is_cuda() ? "cudagraphs" : "aot_eager";
  int failures = 0;
  for (int stage : {1, 2}) {
    for (const std::string& mode : {std::string("eager"), backend}) {
      auto ddp = std::make_shared<nn::DistributedDataParallel>(make_mlp(device));
      optim::AdamW ddp_opt(ddp->parameters(), kAdam);
      auto model = make_mlp(device);
      distributed::ZeroRedundancyOptimizer zero(model->parameters(), distributed::optimizer_class<optim::AdamW>(kAdam),
                                                {.stage = stage, .bucket_cap_mb = 0.01, .max_grad_norm = kMaxNorm});
      auto loss_fn = [model](const Tensor& x, const Tensor& y) { return cross_entropy((*model)(x), y); };
      Compiled<decltype(loss_fn)> compiled(loss_fn, {.backend = backend});
      optim::CompiledStep step(zero, {.backend = backend});
      Tensor x_static = zeros({kRows / world, 16}, {.device = device});
      Tensor y_static = zeros({kRows / world}, {.dtype = kInt64, .device = device});
      for (int s = 0; s < kSteps; ++s) {
        auto [x, y] = local_batch(s, rank, world, device);
        ddp_opt.zero_grad();
        cross_entropy((*ddp)(x), y).backward();
        nn::utils::clip_grad_norm_(ddp->parameters(), kMaxNorm);
        ddp_opt.step();
        x_static.copy_(x);
        y_static.copy_(y);
        zero.zero_grad();
        if (mode == "eager") {
          loss_fn(x_static, y_static).backward();
          zero.step();
        } else {
          compiled(x_static, y_static).backward();
          step.step();
        }
      }
      const double diff = max_abs_diff(model->parameters(), ddp->parameters());
      const bool ok = diff < 2e-5;
      failures += ok ? 0 : 1;
      std::printf("rank %d stage %d %s: max |zero - ddp| = %.3g over %d steps, %lld of %lld state elements: %s\n",
                  rank, stage, mode.c_str(), diff, kSteps, static_cast<long long>(zero.state_numel()),
                  static_cast<long long>(2 * zero.layout().groups[0].flat_size() + 1), ok ? "ok" : "MISMATCH");
      if (mode != "eager") {
        const bool compiled_once = step.counters().compilations == 1;
        failures += compiled_once ? 0 : 1;
        std::printf("rank %d stage %d %s: %d compilation(s) of the step: %s\n", rank, stage, mode.c_str(),
                    step.counters().compilations, compiled_once ? "ok" : "RECOMPILED");
      }
    }
  }
  return failures == 0 ? 0 : 1;
}

// Trains steps [from, kSteps); with `save_dir`, saves after step 2. Rank 0 prints the losses.
int train(const std::string& dir, int stage, bool resume) {
  auto group = distributed::default_group();
  const int rank = group->rank(), world = group->world_size();
  const Device device = group->device();
  auto model = make_mlp(device);
  distributed::ZeroRedundancyOptimizer zero(model->parameters(), distributed::optimizer_class<optim::AdamW>(kAdam),
                                            {.stage = stage, .bucket_cap_mb = 0.01, .max_grad_norm = kMaxNorm});
  int from = 0;
  if (resume) {
    model->load_state_dict(load_safetensors(dir + "/model.safetensors", device).tensors);
    zero.load_sharded(dir);
    from = 3;
  }
  for (int s = from; s < kSteps; ++s) {
    auto [x, y] = local_batch(s, rank, world, device);
    zero.zero_grad();
    Tensor loss = cross_entropy((*model)(x), y);
    loss.backward();
    zero.step();
    const double whole = distributed::all_reduce(loss.detach(), distributed::ReduceOp::Avg).item<double>();
    if (rank == 0 && s >= 3) std::printf("zero-loss %d %.12g\n", s, whole);
    if (!resume && s == 2) {
      zero.save_sharded(dir);
      if (rank == 0) save_safetensors(dir + "/model.safetensors", model->state_dict());
      group->barrier("model_saved");
    }
  }
  std::fflush(stdout);
  return 0;
}

int hang_at(int at) {
  auto group = distributed::default_group();
  const int rank = group->rank(), world = group->world_size();
  const Device device = group->device();
  auto model = make_mlp(device);
  distributed::ZeroRedundancyOptimizer zero(model->parameters(), distributed::optimizer_class<optim::AdamW>(kAdam),
                                            {.stage = 2, .bucket_cap_mb = 0.01});
  for (int s = 0;; ++s) {
    if (rank == 1 && s == at) {
      std::printf("rank 1: stops calling collectives at step %d\n", s);
      std::fflush(stdout);
      std::this_thread::sleep_for(std::chrono::minutes(1));
      return 3;
    }
    auto [x, y] = local_batch(s, rank, world, device);
    zero.zero_grad();
    cross_entropy((*model)(x), y).backward();
    zero.step();
    (void)model->parameters()[0].sum().item<double>();  // one step at a time
  }
}

}  // namespace

int main(int argc, char** argv) {
  try {
    distributed::InitOptions options;
    if (const char* ms = std::getenv("TG_TEST_TIMEOUT_MS")) options.timeout = std::chrono::milliseconds(std::atoi(ms));
    distributed::init(options);
    const std::string what = argc > 1 ? argv[1] : "parity";
    int rc = 2;
    if (what == "parity") rc = parity();
    if ((what == "save" || what == "resume") && argc > 3) rc = train(argv[2], std::atoi(argv[3]), what == "resume");
    if (what == "hang" && argc > 2) rc = hang_at(std::atoi(argv[2]));
    distributed::destroy();
    return rc;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "zero_worker: %s\n", e.what());
    return 1;
  }
}
