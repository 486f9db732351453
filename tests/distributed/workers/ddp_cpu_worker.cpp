// One rank of the CPU data-parallel checks (started by tgrun from test_ddp_cpu_processes), on the
// CPU backend:
//   ddp_cpu_worker parity   10 SGD steps (momentum 0.9) of the digits MLP (train_digits' 64-128-10
//                           network, on random batches shaped like the digits) with
//                           DistributedDataParallel, eager and compiled (aot_eager), each rank on its
//                           share of a batch; the losses (averaged over ranks) and the parameters
//                           must equal a one-process run on the whole batch, and the compiled
//                           backward must hold the bucket reductions.
//   ddp_cpu_worker die AT   eager training where rank 1 kills itself at step AT; the others must
//                           fail in a collective naming the lost rank.
//   ddp_cpu_worker die-after MS
//                           eager training where a thread of rank 1 kills it MS milliseconds after
//                           the first step, wherever it is then (often inside a collective).
//   ddp_cpu_worker hang AT [aot_eager]
//                           training (eager, or compiled) where rank 1 stops calling collectives at
//                           step AT (it sleeps for a minute); the others must time out naming the
//                           collective, its DDP bucket and the step.
// Prints one line per check and exits non-zero on a mismatch.
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "distributed/collectives/collectives.h"
#include "distributed/ddp/ddp.h"
#include "examples/digits_models.h"
#include "tapegraph.h"

using namespace tg;

namespace {

constexpr int64_t kRows = 48;  // the whole batch, split evenly over 1, 2, 3 or 4 ranks
constexpr int kSteps = 10;

std::shared_ptr<nn::Sequential> make_mlp() {
  manual_seed(0);
  auto m = std::make_shared<nn::Sequential>();
  m->push_back(std::make_shared<nn::Linear>(16, 32));
  m->push_back(std::make_shared<nn::ReLU>());
  m->push_back(std::make_shared<nn::Linear>(32, 32));
  m->push_back(std::make_shared<nn::ReLU>());
  m->push_back(std::make_shared<nn::Linear>(32, 8));
  return m;
}

// The whole batch of step `step`, the same on every rank.
std::pair<Tensor, Tensor> global_batch(int step) {
  manual_seed(1000 + static_cast<uint64_t>(step));
  return {randn({kRows, 16}), randint(0, 8, {kRows})};
}

// train_digits' MLP (64-128-10), its weights the same on every rank.
std::shared_ptr<nn::Sequential> make_digits_mlp() {
  manual_seed(0);
  return digits::make_model("mlp", 64, 10);
}

// The whole batch of step `step` shaped like the digits, the same on every rank: 8x8 images of
// pixels 0 to 16 (scaled to [0, 1]), labelled 0 to 9 by which of the first ten pixels is brightest
// (a rule the MLP can learn, so the loss falls).
std::pair<Tensor, Tensor> digits_batch(int step) {
  manual_seed(2000 + static_cast<uint64_t>(step));
  const Tensor x = randint(0, 17, {kRows, 64}).to(kFloat32) / 16.0;
  return {x, x.narrow(1, 0, 10).argmax(1)};
}

double max_abs_diff(const TensorList& a, const TensorList& b) {
  double worst = 0;
  for (size_t k = 0; k < a.size(); ++k) worst = std::max(worst, (a[k].detach() - b[k].detach()).abs().amax().item<double>());
  return worst;
}

int parity() {
  auto group = distributed::default_group();
  const int rank = group->rank(), world = group->world_size();
  const int64_t rows = kRows / world;

  // The reference: one process, the whole batch.
  auto reference = make_digits_mlp();
  optim::SGD ref_sgd(reference->parameters(), {.lr = 0.05, .momentum = 0.9});
  std::vector<double> ref_losses;
  for (int step = 0; step < kSteps; ++step) {
    auto [x, y] = digits_batch(step);
    ref_sgd.zero_grad();
    const Tensor loss = cross_entropy((*reference)(x), y);
    loss.backward();
    ref_sgd.step();
    ref_losses.push_back(loss.item<double>());
  }

  int failures = 0;
  for (const std::string mode : {"eager", "aot_eager"}) {
    auto ddp = std::make_shared<nn::DistributedDataParallel>(
        make_digits_mlp(), nn::DistributedDataParallelOptions{.bucket_cap_mb = 0.004, .first_bucket_cap_mb = 0.001});
    optim::SGD sgd(ddp->parameters(), {.lr = 0.05, .momentum = 0.9});
    auto loss_fn = [ddp](const Tensor& x, const Tensor& y) { return cross_entropy((*ddp)(x), y); };
    Compiled<decltype(loss_fn)> compiled(loss_fn, {.backend = "aot_eager"});
    double loss_diff = 0;
    for (int step = 0; step < kSteps; ++step) {
      auto [x, y] = digits_batch(step);
      const Tensor xs = x.narrow(0, rank * rows, rows).contiguous(), ys = y.narrow(0, rank * rows, rows).contiguous();
      sgd.zero_grad();
      const Tensor loss = mode == "eager" ? loss_fn(xs, ys) : compiled(xs, ys);
      loss.backward();
      sgd.step();
      // The loss of the whole batch: the mean of the ranks' means over equal shares.
      const double whole = distributed::all_reduce(loss.detach(), distributed::ReduceOp::Avg).item<double>();
      loss_diff = std::max(loss_diff, std::abs(whole - ref_losses[static_cast<size_t>(step)]));
    }
    const bool losses_ok = loss_diff <= 1e-5;
    failures += losses_ok ? 0 : 1;
    std::printf("rank %d %s: max |loss - one process on the whole batch| = %.3g over %d steps (loss %.4f to %.4f): "
                "%s\n", rank, mode.c_str(), loss_diff, kSteps, ref_losses.front(), ref_losses.back(),
                losses_ok ? "ok" : "MISMATCH");
    const double diff = max_abs_diff(ddp->parameters(), reference->parameters());
    const bool ok = diff < 1e-6;
    failures += ok ? 0 : 1;
    std::printf("rank %d %s: max |ddp - one process on the whole batch| = %.3g over %d steps on %d ranks, %zu "
                "buckets: %s\n", rank, mode.c_str(), diff, kSteps, world, ddp->bucket_names().size(), ok ? "ok" : "MISMATCH");
    if (mode == "aot_eager") {
      const auto& c = compiled.counters();
      const int buckets = c.backward_ops.count("bucket_average") ? c.backward_ops.at("bucket_average") : 0;
      const bool in_graph = buckets == static_cast<int>(ddp->bucket_names().size());
      failures += in_graph ? 0 : 1;
      std::printf("rank %d aot_eager: %d bucket all-reduce(s) in the backward graph: %s\n", rank, buckets,
                  in_graph ? "ok" : "MISSING");
    }
  }
  return failures == 0 ? 0 : 1;
}

int die_at(int at) {
  auto group = distributed::default_group();
  auto ddp = std::make_shared<nn::DistributedDataParallel>(make_mlp());
  optim::SGD sgd(ddp->parameters(), {.lr = 0.05});
  for (int step = 0;; ++step) {
    if (group->rank() == 1 && step == at) {
      std::printf("rank 1: killing itself at step %d\n", step);
      std::fflush(stdout);
      std::raise(SIGKILL);
    }
    auto [x, y] = global_batch(step);
    sgd.zero_grad();
    cross_entropy((*ddp)(x), y).backward();
    sgd.step();
  }
}

int die_after(int ms) {
  auto group = distributed::default_group();
  auto ddp = std::make_shared<nn::DistributedDataParallel>(make_mlp(), nn::DistributedDataParallelOptions{.bucket_cap_mb = 0.004});
  optim::SGD sgd(ddp->parameters(), {.lr = 0.05});
  for (int step = 0;; ++step) {
    if (group->rank() == 1 && step == 1) {
      std::thread([ms] {
        std::this_thread::sleep_for(std::chrono::milliseconds(ms));
        std::printf("rank 1: killed %d ms into training\n", ms);
        std::fflush(stdout);
        std::raise(SIGKILL);
      }).detach();
    }
    auto [x, y] = global_batch(step);
    sgd.zero_grad();
    cross_entropy((*ddp)(x), y).backward();
    sgd.step();
  }
}

int hang_at(int at, const std::string& mode) {
  auto group = distributed::default_group();
  auto ddp = std::make_shared<nn::DistributedDataParallel>(
      make_mlp(), nn::DistributedDataParallelOptions{.bucket_cap_mb = 0.004, .first_bucket_cap_mb = 0.001});
  optim::SGD sgd(ddp->parameters(), {.lr = 0.05});
  auto loss_fn = [ddp](const Tensor& x, const Tensor& y) { return cross_entropy((*ddp)(x), y); };
  Compiled<decltype(loss_fn)> compiled(loss_fn, {.backend = "aot_eager"});
  for (int step = 0;; ++step) {
    if (group->rank() == 1 && step == at) {
      std::printf("rank 1: stops calling collectives at step %d\n", step);
      std::fflush(stdout);
      std::this_thread::sleep_for(std::chrono::minutes(1));
      return 3;
    }
    auto [x, y] = global_batch(step);
    sgd.zero_grad();
    (mode == "aot_eager" ? compiled(x, y) : loss_fn(x, y)).backward();
    sgd.step();
  }
}

}  // namespace

int main(int argc, char** argv) {
  try {
    distributed::InitOptions options;
    options.backend = "cpu";
    if (const char* ms = std::getenv("TG_TEST_TIMEOUT_MS")) options.timeout = std::chrono::milliseconds(std::atoi(ms));
    distributed::init(options);
    const std::string what = argc > 1 ? argv[1] : "parity";
    int rc = 2;
    if (what == "parity") rc = parity();
    if (what == "die" && argc > 2) rc = die_at(std::atoi(argv[2]));
    if (what == "die-after" && argc > 2) rc = die_after(std::atoi(argv[2]));
    if (what == "hang" && argc > 2) rc = hang_at(std::atoi(argv[2]), argc > 3 ? argv[3] : "eager");
    distributed::destroy();
    return rc;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ddp_cpu_worker: %s\n", e.what());
    return 1;
  }
}
