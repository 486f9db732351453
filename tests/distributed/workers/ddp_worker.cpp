// One rank of the two-GPU data-parallel checks (started by tgrun from test_ddp_multi_gpu):
//   ddp_worker parity     20 SGD steps with DistributedDataParallel, eager and compiled (cudagraphs),
//                         each rank on its half of a batch; the parameters must equal a one-GPU run on
//                         the whole batch, and the compiled backward must hold the reductions.
//   ddp_worker reduce_dtype  float32 gradients averaged in bfloat16 and bfloat16 gradients averaged in
//                         float32, eager and under cudagraphs: each rank's gradients must equal the
//                         float64 average of both ranks' local gradients rounded to the reduce dtype.
//   ddp_worker die AT     eager training where rank 1 kills itself at step AT (the launcher must stop
//                         rank 0, which waits in a collective).
//   ddp_worker hang AT MODE
//                         training (MODE eager or cudagraphs) where rank 1 stops calling collectives
//                         at step AT (it sleeps for a minute): rank 0's watchdog must name what it
//                         waited in (the collective and its bucket, or the replayed graph and the
//                         last step whose replay completed) and exit; tgrun then stops rank 1.
// Prints one line per check and exits non-zero on a mismatch.
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "distributed/collectives/collectives.h"
#include "distributed/ddp/ddp.h"
#include "tapegraph.h"
#include "tensor/cuda_runtime.h"

using namespace tg;

namespace {

constexpr int64_t kRowsPerRank = 32;
constexpr int kSteps = 20;

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

// The whole batch of step `step` (the same on every rank), on the CPU.
std::pair<Tensor, Tensor> global_batch(int step, int world) {
  manual_seed(1000 + static_cast<uint64_t>(step));
  return {randn({kRowsPerRank * world, 16}), randint(0, 8, {kRowsPerRank * world})};
}

double max_abs_diff(const TensorList& a, const TensorList& b) {
  double worst = 0;
  for (size_t k = 0; k < a.size(); ++k) worst = std::max(worst, (a[k].detach().cpu() - b[k].detach().cpu()).abs().amax().item<double>());
  return worst;
}

int parity() {
  auto group = distributed::default_group();
  const int rank = group->rank(), world = group->world_size();
  const Device device = group->device();

  // The reference: one process, the whole batch.
  auto reference = make_mlp(device);
  optim::SGD ref_sgd(reference->parameters(), {.lr = 0.05, .momentum = 0.9});
  for (int step = 0; step < kSteps; ++step) {
    auto [x, y] = global_batch(step, world);
    ref_sgd.zero_grad();
    cross_entropy((*reference)(x.to(device)), y.to(device)).backward();
    ref_sgd.step();
  }

  int failures = 0;
  for (const std::string mode : {"eager", "cudagraphs"}) {
    auto ddp = std::make_shared<nn::DistributedDataParallel>(make_mlp(device));
    optim::SGD sgd(ddp->parameters(), {.lr = 0.05, .momentum = 0.9});
    auto loss_fn = [ddp](const Tensor& x, const Tensor& y) { return cross_entropy((*ddp)(x), y); };
    Compiled<decltype(loss_fn)> compiled(loss_fn, {.backend = "cudagraphs"});
    optim::CompiledStep compiled_step(sgd);
    graphs::reset_global_counters();
    Tensor x_static = zeros({kRowsPerRank, 16}, {.device = device});
    Tensor y_static = zeros({kRowsPerRank}, {.dtype = kInt64, .device = device});
    for (int step = 0; step < kSteps; ++step) {
      auto [x, y] = global_batch(step, world);
      x_static.copy_(x.narrow(0, rank * kRowsPerRank, kRowsPerRank));
      y_static.copy_(y.narrow(0, rank * kRowsPerRank, kRowsPerRank));
      sgd.zero_grad();
      if (mode == "eager") {
        loss_fn(x_static, y_static).backward();
        sgd.step();
      } else {
        compiled(x_static, y_static).backward();
        compiled_step.step();
      }
    }
    const double diff = max_abs_diff(ddp->parameters(), reference->parameters());
    const bool ok = diff < 2e-5;
    failures += ok ? 0 : 1;
    std::printf("rank %d %s: max |ddp - one GPU on the whole batch| = %.3g over %d steps: %s\n", rank, mode.c_str(),
                diff, kSteps, ok ? "ok" : "MISMATCH");
    if (mode == "cudagraphs") {
      const auto& c = compiled.counters();
      const auto all = graphs::global_counters();
      const int buckets = c.backward_ops.count("bucket_average") ? c.backward_ops.at("bucket_average") : 0;
      const bool captured = buckets > 0 && all.eager_segments == 0 && all.replays > 0;
      failures += captured ? 0 : 1;
      std::printf("rank %d cudagraphs: %d bucket all-reduce(s) in the backward graph, %d graphs captured, %d replays, "
                  "%d eager segments: %s\n", rank, buckets, all.graphs_captured, all.replays, all.eager_segments,
                  captured ? "ok" : "NOT CAPTURED");
    }
  }
  return failures == 0 ? 0 : 1;
}

// The local gradients of a plain model (in `dtype`) on rank r's half of the batch of `step`.
TensorList local_grads(Device device, DType dtype, int step, int r, int world) {
  auto m = make_mlp(device);
  m->to(dtype);
  auto [x, y] = global_batch(step, world);
  Tensor xr = x.narrow(0, r * kRowsPerRank, kRowsPerRank).to(device).to(dtype);
  Tensor yr = y.narrow(0, r * kRowsPerRank, kRowsPerRank).to(device);
  cross_entropy((*m)(xr).to(kFloat32), yr).backward();
  TensorList out;
  for (const Tensor& p : m->parameters()) out.push_back(p.grad().to(kCPU));
  return out;
}

// The float64 definition: the mean of the ranks' gradients as they travel (in `wire`), rounded to
// `wire` and then to the gradients' dtype.
TensorList expected_average(Device device, DType dtype, DType wire, int step, int world) {
  std::vector<TensorList> locals;
  for (int r = 0; r < world; ++r) locals.push_back(local_grads(device, dtype, step, r, world));
  TensorList out;
  for (size_t k = 0; k < locals[0].size(); ++k) {
    Tensor sum = zeros(locals[0][k].sizes(), {.dtype = kFloat64});
    for (const TensorList& g : locals) sum = sum + g[k].to(wire).to(kFloat64);
    out.push_back((sum / static_cast<double>(world)).to(wire).to(dtype).to(kFloat64));
  }
  return out;
}

int reduce_dtype_check() {
  auto group = distributed::default_group();
  const int rank = group->rank(), world = group->world_size();
  const Device device = group->device();
  constexpr int kCalls = 5;  // compiled: warm-up, recording, then replays; a new batch each time
  int failures = 0;
  for (const auto& [param_dtype, wire] : {std::pair{kFloat32, kBFloat16}, std::pair{kBFloat16, kFloat32}}) {
    for (const std::string mode : {"eager", "cudagraphs"}) {
      auto m = make_mlp(device);
      m->to(param_dtype);
      auto ddp = std::make_shared<nn::DistributedDataParallel>(
          m, nn::DistributedDataParallelOptions{.first_bucket_cap_mb = 0.01, .reduce_dtype = wire});
      auto loss_fn = [ddp](const Tensor& x, const Tensor& y) { return cross_entropy((*ddp)(x).to(kFloat32), y); };
      Compiled<decltype(loss_fn)> compiled(loss_fn, {.backend = "cudagraphs"});
      Tensor x_static = zeros({kRowsPerRank, 16}, {.dtype = param_dtype, .device = device});
      Tensor y_static = zeros({kRowsPerRank}, {.dtype = kInt64, .device = device});
      // Worst error in units of 2^-7 relative (a bfloat16 ulp at most) plus 1e-6: the ranks' local
      // gradients may differ from the plain model's in their last bits (compiled kernels), but a
      // conversion that read the bucket before its reduction finished would be far off.
      double worst = 0;
      for (int call = 0; call < kCalls; ++call) {
        auto [x, y] = global_batch(call, world);
        x_static.copy_(x.narrow(0, rank * kRowsPerRank, kRowsPerRank));
        y_static.copy_(y.narrow(0, rank * kRowsPerRank, kRowsPerRank));
        ddp->zero_grad();
        (mode == "eager" ? loss_fn(x_static, y_static) : compiled(x_static, y_static)).backward();
        const TensorList expected = expected_average(device, param_dtype, wire, call, world);
        const TensorList params = ddp->parameters();
        for (size_t k = 0; k < params.size(); ++k) {
          const Tensor got = params[k].grad().to(kCPU).to(kFloat64);
          const Tensor bound = expected[k].abs() * (1.0 / 128) + 1e-6;
          worst = std::max(worst, ((got - expected[k]).abs() / bound).amax().item<double>());
        }
      }
      const bool ok = worst <= 2.0;
      failures += ok ? 0 : 1;
      const std::string what = std::string(dtype_name(param_dtype)) + " reduced in " + std::string(dtype_name(wire));
      std::printf("rank %d %s %s: worst error %.3g (bound 2): %s\n", rank, mode.c_str(), what.c_str(), worst,
                  ok ? "ok" : "MISMATCH");
      if (mode == "cudagraphs") {
        const auto& c = compiled.counters();
        const int casts = c.backward_ops.count("bucket_cast") ? c.backward_ops.at("bucket_cast") : 0;
        std::printf("rank %d cudagraphs %s: %d bucket_cast(s) in the backward graph\n", rank, what.c_str(), casts);
        failures += casts > 0 ? 0 : 1;
      }
    }
  }
  return failures == 0 ? 0 : 1;
}

int die_at(int at) {
  auto group = distributed::default_group();
  const Device device = group->device();
  auto ddp = std::make_shared<nn::DistributedDataParallel>(make_mlp(device));
  optim::SGD sgd(ddp->parameters(), {.lr = 0.05});
  for (int step = 0;; ++step) {
    if (group->rank() == 1 && step == at) {
      std::printf("rank 1: killing itself at step %d\n", step);
      std::fflush(stdout);
      std::raise(SIGKILL);
    }
    auto [x, y] = global_batch(step, group->world_size());
    sgd.zero_grad();
    cross_entropy((*ddp)(x.narrow(0, 0, kRowsPerRank).to(device)), y.narrow(0, 0, kRowsPerRank).to(device)).backward();
    sgd.step();
    cuda::synchronize(device.index);
  }
}

int hang_at(int at, const std::string& mode) {
  auto group = distributed::default_group();
  const int rank = group->rank(), world = group->world_size();
  const Device device = group->device();
  // Three buckets (the caps are a few KiB), so the messages name one of several.
  auto ddp = std::make_shared<nn::DistributedDataParallel>(
      make_mlp(device), nn::DistributedDataParallelOptions{.bucket_cap_mb = 0.004, .first_bucket_cap_mb = 0.001});
  optim::SGD sgd(ddp->parameters(), {.lr = 0.05});
  auto loss_fn = [ddp](const Tensor& x, const Tensor& y) { return cross_entropy((*ddp)(x), y); };
  Compiled<decltype(loss_fn)> compiled(loss_fn, {.backend = "cudagraphs"});
  optim::CompiledStep compiled_step(sgd);
  Tensor x_static = zeros({kRowsPerRank, 16}, {.device = device});
  Tensor y_static = zeros({kRowsPerRank}, {.dtype = kInt64, .device = device});
  for (int step = 0;; ++step) {
    if (rank == 1 && step == at) {
      std::printf("rank 1: stops calling collectives at step %d\n", step);
      std::fflush(stdout);
      std::this_thread::sleep_for(std::chrono::minutes(1));
      return 3;
    }
    auto [x, y] = global_batch(step, world);
    x_static.copy_(x.narrow(0, rank * kRowsPerRank, kRowsPerRank));
    y_static.copy_(y.narrow(0, rank * kRowsPerRank, kRowsPerRank));
    sgd.zero_grad();
    if (mode == "cudagraphs") {
      compiled(x_static, y_static).backward();
      compiled_step.step();
    } else {
      loss_fn(x_static, y_static).backward();
      sgd.step();
    }
    cuda::synchronize(device.index);
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
    if (what == "reduce_dtype") rc = reduce_dtype_check();
    if (what == "die" && argc > 2) rc = die_at(std::atoi(argv[2]));
    if (what == "hang" && argc > 3) rc = hang_at(std::atoi(argv[2]), argv[3]);
    distributed::destroy();
    return rc;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ddp_worker: %s\n", e.what());
    return 1;
  }
}
