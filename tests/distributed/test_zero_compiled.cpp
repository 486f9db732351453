// ZeroRedundancyOptimizer stage 2 under compile(): the compiled backward graph reduce-scatters each
// bucket itself and delivers this rank's blocks to the shard parameters' .grad. On 2 and 3 ranks of
// the CPU backend (threads of this process) the losses and parameters equal eager stage 2 and
// DistributedDataParallel, with float32 and float64 parameters (one flat space each); backwards
// accumulate, undefined gradients count as zeros, a graph holding only some parameters leaves them
// to the hooks, and on a GPU the reductions are captured in the backward's CUDA graph.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>

#include "distributed/collectives/collectives.h"
#include "distributed/ddp/ddp.h"
#include "distributed/zero/zero_optimizer.h"
#include "support/test_support.h"
#include "support/thread_ranks.h"

namespace tg::distributed {
namespace {

using testing::run_ranks;

constexpr int64_t kRows = 12;  // the whole batch: divides evenly over 1 to 4 ranks
const optim::AdamOptions kAdamW{.lr = 0.01, .weight_decay = 0.1};
const CompileOptions kAot{.backend = "aot_eager"};

// An MLP whose logits a float64 parameter scales: two dtypes, so two flat spaces.
class ScaledMlp : public nn::Module {
 public:
  explicit ScaledMlp(Device device = kCPU) {
    manual_seed(0);
    mlp_ = register_module("mlp", std::make_shared<nn::Sequential>());
    mlp_->push_back(std::make_shared<nn::Linear>(6, 32));
    mlp_->push_back(std::make_shared<nn::ReLU>());
    mlp_->push_back(std::make_shared<nn::Linear>(32, 16));
    mlp_->push_back(std::make_shared<nn::ReLU>());
    mlp_->push_back(std::make_shared<nn::Linear>(16, 4));
    scale_ = register_parameter("scale", full({4}, 1.5, {.dtype = kFloat64}));
    to(device);
  }
  Tensor forward(const Tensor& x) override { return mul(mlp_->forward(x).to(kFloat64), scale_); }
  std::string type_name() const override { return "ScaledMlp"; }
  // The MLP's weights and biases, first layer first.
  TensorList mlp_params() const { return mlp_->parameters(); }
  const Tensor& scale() const { return scale_; }

 private:
  std::shared_ptr<nn::Sequential> mlp_;
  Tensor scale_;
};

std::vector<std::pair<Tensor, Tensor>> make_batches(int steps, Device device = kCPU) {
  std::vector<std::pair<Tensor, Tensor>> out;
  manual_seed(77);
  for (int s = 0; s < steps; ++s) out.emplace_back(randn({kRows, 6}).to(device), randint(0, 4, {kRows}).to(device));
  return out;
}

std::pair<Tensor, Tensor> slice(const std::pair<Tensor, Tensor>& b, int rank, int world) {
  const int64_t n = kRows / world;
  return {b.first.narrow(0, rank * n, n), b.second.narrow(0, rank * n, n)};
}

std::shared_ptr<ProcessGroup> handle(ProcessGroup& g) { return {&g, [](ProcessGroup*) {}}; }

std::vector<std::shared_ptr<ScaledMlp>> models(int count) {
  std::vector<std::shared_ptr<ScaledMlp>> out;
  for (int i = 0; i < count; ++i) out.push_back(std::make_shared<ScaledMlp>());
  return out;
}

void expect_params_close(const TensorList& a, const TensorList& b, double rtol, double atol) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t k = 0; k < a.size(); ++k) testing::expect_close(a[k].detach(), b[k].detach(), rtol, atol);
}

// The model's loss from its first layer's output `h` on.
Tensor loss_of_rest(const ScaledMlp& m, const Tensor& h, const Tensor& y) {
  const TensorList p = m.mlp_params();
  const Tensor h2 = relu(linear(h, p[2], p[3]));
  return cross_entropy(mul(linear(h2, p[4], p[5]).to(kFloat64), m.scale()), y);
}

// A stage 2 AdamW over `params`, with buckets small enough that the test MLP spans several.
std::unique_ptr<ZeroRedundancyOptimizer> stage2(const TensorList& params, std::shared_ptr<ProcessGroup> group) {
  return std::make_unique<ZeroRedundancyOptimizer>(
      params, optimizer_class<optim::AdamW>(kAdamW),
      ZeroOptions{.process_group = std::move(group), .stage = 2, .bucket_cap_mb = 0.0002});
}

size_t bucket_count(const ZeroRedundancyOptimizer& zero) {
  size_t n = 0;
  for (const ZeroGroup& g : zero.layout().groups) n += g.buckets.size();
  return n;
}

// Compiled stage 2, eager stage 2 and DDP, each on its own copy of the model, on every rank.
void expect_compiled_matches_eager_and_ddp(int world) {
  SCOPED_TRACE("world " + std::to_string(world));
  const int steps = 5;
  const auto batches = make_batches(steps);
  auto compiled_models = models(world), eager_models = models(world), ddp_models = models(world);
  run_ranks(world, [&](ProcessGroup& group) {
    const int r = group.rank();
    auto compiled_zero_owner = stage2(compiled_models[r]->parameters(), handle(group));
    auto eager_zero_owner = stage2(eager_models[r]->parameters(), handle(group));
    ZeroRedundancyOptimizer &compiled_zero = *compiled_zero_owner, &eager_zero = *eager_zero_owner;
    nn::DistributedDataParallel ddp(ddp_models[r], {.process_group = handle(group)});
    optim::AdamW ddp_opt(ddp.parameters(), kAdamW);
    auto loss_fn = [m = compiled_models[r]](const Tensor& x, const Tensor& y) { return cross_entropy((*m)(x), y); };
    Compiled<decltype(loss_fn)> compiled(loss_fn, kAot);
    for (const auto& b : batches) {
      auto [x, y] = slice(b, r, world);
      compiled_zero.zero_grad();
      const Tensor compiled_loss = compiled(x, y);
      compiled_loss.backward();
      for (const Tensor& p : compiled_models[r]->parameters())
        EXPECT_FALSE(p.grad().defined()) << "the full gradients are not kept";
      eager_zero.zero_grad();
      const Tensor eager_loss = cross_entropy((*eager_models[r])(x), y);
      eager_loss.backward();
      // The shards got one average each: the hooks did not reduce the compiled gradients again.
      for (size_t g = 0; g < eager_zero.shard_params().size(); ++g)
        testing::expect_close(compiled_zero.shard_params()[g].grad(), eager_zero.shard_params()[g].grad(), 1e-6, 1e-7);
      ddp_opt.zero_grad();
      const Tensor ddp_loss = cross_entropy(ddp(x), y);
      ddp_loss.backward();
      compiled_zero.step();
      eager_zero.step();
      ddp_opt.step();
      testing::expect_close(compiled_loss, eager_loss, 1e-6, 1e-7);
      testing::expect_close(compiled_loss, ddp_loss, 1e-5, 1e-6);
      expect_params_close(compiled_models[r]->parameters(), eager_models[r]->parameters(), 1e-6, 1e-7);
      expect_params_close(compiled_models[r]->parameters(), ddp_models[r]->parameters(), 1e-5, 1e-6);
    }
    const auto& c = compiled.counters();
    EXPECT_EQ(c.compilations, 1) << "later steps replay the first compilation";
    EXPECT_EQ(c.compiled_calls, steps);
    ASSERT_EQ(compiled_zero.layout().groups.size(), 2u) << "float32 and float64";
    EXPECT_GT(bucket_count(compiled_zero), 3u) << "a small cap: several buckets";
    ASSERT_EQ(c.backward_ops.count("reduce_scatter"), 1u);
    EXPECT_EQ(static_cast<size_t>(c.backward_ops.at("reduce_scatter")), bucket_count(compiled_zero))
        << "one reduce_scatter per bucket in the backward graph";
    EXPECT_EQ(c.forward_ops.count("reduce_scatter"), 0u);
  });
}

TEST(ZeroCompiled, TwoRanksMatchEagerStage2AndDistributedDataParallel) { expect_compiled_matches_eager_and_ddp(2); }

TEST(ZeroCompiled, ThreeRanksMatchEagerStage2AndDistributedDataParallel) { expect_compiled_matches_eager_and_ddp(3); }

TEST(ZeroCompiled, ReductionsAreScheduledAsSoonAsTheirBucketsGradientsExist) {
  // The first bucket (the last layer's gradients) is reduced before the first layer's weight
  // gradient is computed.
  auto model = std::make_shared<ScaledMlp>();
  run_ranks(1, [&](ProcessGroup& group) {
    ZeroRedundancyOptimizer zero(model->parameters(), optimizer_class<optim::AdamW>(kAdamW),
                                 {.process_group = handle(group), .stage = 2, .bucket_cap_mb = 0.0002});
    auto loss_fn = [&model](const Tensor& x, const Tensor& y) { return cross_entropy((*model)(x), y); };
    Compiled<decltype(loss_fn)> compiled(loss_fn, kAot);
    const auto batches = make_batches(1);
    compiled(batches[0].first, batches[0].second).backward();
    const graphs::Graph& bw = compiled.last_partition()->backward;
    int first_collective = -1, last_matmul = -1;
    for (size_t i = 0; i < bw.nodes.size(); ++i) {
      const std::string name(bw.nodes[i].op->name());
      if (name == "reduce_scatter" && first_collective < 0) first_collective = static_cast<int>(i);
      if (name == "matmul" || name == "mm" || name == "addmm" || name == "linear") last_matmul = static_cast<int>(i);
    }
    ASSERT_GE(first_collective, 0);
    ASSERT_GE(last_matmul, 0) << bw.to_text();
    EXPECT_LT(first_collective, last_matmul) << bw.to_text();
  });
}

TEST(ZeroCompiled, BackwardsAccumulateIntoTheShards) {
  // Two compiled micro-batches per step equal two eager ones: each adds its averaged blocks.
  const int world = 2;
  const auto batches = make_batches(6);
  auto compiled_models = models(world), eager_models = models(world);
  run_ranks(world, [&](ProcessGroup& group) {
    const int r = group.rank();
    auto compiled_zero_owner = stage2(compiled_models[r]->parameters(), handle(group));
    auto eager_zero_owner = stage2(eager_models[r]->parameters(), handle(group));
    ZeroRedundancyOptimizer &compiled_zero = *compiled_zero_owner, &eager_zero = *eager_zero_owner;
    auto loss_fn = [m = compiled_models[r]](const Tensor& x, const Tensor& y) { return cross_entropy((*m)(x), y); };
    Compiled<decltype(loss_fn)> compiled(loss_fn, kAot);
    for (size_t i = 0; i < batches.size(); i += 2) {
      compiled_zero.zero_grad();
      eager_zero.zero_grad();
      for (size_t micro = i; micro < i + 2; ++micro) {
        auto [x, y] = slice(batches[micro], r, world);
        compiled(x, y).backward();
        cross_entropy((*eager_models[r])(x), y).backward();
      }
      compiled_zero.step();
      eager_zero.step();
      expect_params_close(compiled_models[r]->parameters(), eager_models[r]->parameters(), 1e-6, 1e-7);
    }
    EXPECT_EQ(compiled.counters().compilations, 1);
  });
}

TEST(ZeroCompiled, UndefinedGradientsCountAsZeros) {
  // A parameter the compiled function reads without the loss depending on it gets an undefined
  // gradient in the graph: its place in the bucket is zeros, as a zero gradient's would be.
  const int world = 2;
  const auto batches = make_batches(3);
  auto compiled_models = models(world), eager_models = models(world);
  run_ranks(world, [&](ProcessGroup& group) {
    const int r = group.rank();
    auto compiled_zero_owner = stage2(compiled_models[r]->parameters(), handle(group));
    auto eager_zero_owner = stage2(eager_models[r]->parameters(), handle(group));
    ZeroRedundancyOptimizer &compiled_zero = *compiled_zero_owner, &eager_zero = *eager_zero_owner;
    // The first layer runs without its bias, which the function reads but drops; eagerly the bias
    // enters the loss times zero.
    auto loss_fn = [m = compiled_models[r]](const Tensor& x, const Tensor& y) {
      const TensorList p = m->mlp_params();
      const Tensor unused = p[1].sum();
      (void)unused;
      return loss_of_rest(*m, relu(linear(x, p[0])), y);
    };
    Compiled<decltype(loss_fn)> compiled(loss_fn, kAot);
    for (const auto& b : batches) {
      auto [x, y] = slice(b, r, world);
      compiled_zero.zero_grad();
      eager_zero.zero_grad();
      compiled(x, y).backward();
      const TensorList p = eager_models[r]->mlp_params();
      (loss_of_rest(*eager_models[r], relu(linear(x, p[0])), y) + mul(p[1].sum(), 0.0).to(kFloat64)).backward();
      compiled_zero.step();
      eager_zero.step();
      expect_params_close(compiled_models[r]->parameters(), eager_models[r]->parameters(), 1e-6, 1e-7);
    }
    EXPECT_EQ(static_cast<size_t>(compiled.counters().backward_ops.at("reduce_scatter")), bucket_count(compiled_zero));
  });
}

TEST(ZeroCompiled, AGraphOfSomeParametersLeavesThemToTheHooks) {
  // The head runs eagerly, the body compiled: the graph produces only some parameters' gradients,
  // so the buckets are reduced by the hooks (after the graph) exactly as eagerly.
  const int world = 2;
  const auto batches = make_batches(3);
  auto compiled_models = models(world), eager_models = models(world);
  run_ranks(world, [&](ProcessGroup& group) {
    const int r = group.rank();
    auto compiled_zero_owner = stage2(compiled_models[r]->parameters(), handle(group));
    auto eager_zero_owner = stage2(eager_models[r]->parameters(), handle(group));
    ZeroRedundancyOptimizer &compiled_zero = *compiled_zero_owner, &eager_zero = *eager_zero_owner;
    const TensorList cp = compiled_models[r]->mlp_params();
    auto body = [cp](const Tensor& x) { return relu(linear(x, cp[0], cp[1])); };
    Compiled<decltype(body)> compiled(body, kAot);
    for (const auto& b : batches) {
      auto [x, y] = slice(b, r, world);
      compiled_zero.zero_grad();
      eager_zero.zero_grad();
      loss_of_rest(*compiled_models[r], compiled(x), y).backward();
      const TensorList ep = eager_models[r]->mlp_params();
      loss_of_rest(*eager_models[r], relu(linear(x, ep[0], ep[1])), y).backward();
      compiled_zero.step();
      eager_zero.step();
      expect_params_close(compiled_models[r]->parameters(), eager_models[r]->parameters(), 1e-6, 1e-7);
    }
    EXPECT_EQ(compiled.counters().backward_ops.count("reduce_scatter"), 0u);
  });
}

TEST(ZeroCompiled, AStalledReductionNamesItsBucketAndStep) {
  // Rank 1 stops after two steps: rank 0's third compiled backward times out in its first bucket's
  // reduce_scatter, which the graph node names with the step of the run that issued it.
  using namespace std::chrono_literals;
  std::atomic<bool> done{false};
  const auto batches = make_batches(3);
  auto compiled_models = models(2);
  const auto errors = testing::run_ranks_collecting(
      2,
      [&](ProcessGroup& group) {
        const int r = group.rank();
        ZeroRedundancyOptimizer zero(compiled_models[r]->parameters(), optimizer_class<optim::AdamW>(kAdamW),
                                     {.process_group = handle(group), .stage = 2, .bucket_cap_mb = 0.0002});
        auto loss_fn = [m = compiled_models[r]](const Tensor& x, const Tensor& y) { return cross_entropy((*m)(x), y); };
        Compiled<decltype(loss_fn)> compiled(loss_fn, kAot);
        for (int step = 0; step < 3; ++step) {
          auto [x, y] = slice(batches[static_cast<size_t>(step)], r, 2);
          if (step == 2 && r == 1) {
            while (!done) std::this_thread::sleep_for(5ms);  // alive, but never joins
            return;
          }
          zero.zero_grad();
          const Tensor loss = compiled(x, y);
          if (step < 2) {
            loss.backward();
            zero.step();
            continue;
          }
          // The first bucket reduced holds the last layer's bias: in the float32 group (group 1; the
          // float64 scale, registered first, makes group 0).
          EXPECT_THROW_MSG(loss.backward(), " (ZeRO reduce-scatter, group 1 bucket 0 of 3, step 2) timed out after 300 ms "
                                            "waiting for data from rank 1");
          done = true;
        }
      },
      testing::thread_rank_options(300ms));
  EXPECT_FALSE(errors[0]);
  EXPECT_FALSE(errors[1]);
}

TEST(ZeroCompiled, CudaGraphsCaptureTheReductions) {
  // A group of one on the GPU: the compiled backward's reduce_scatters run inside its CUDA graph.
  TG_REQUIRE_CUDA();
  graphs::reset_global_counters();
  const Device device = cuda_device(0);
  auto compiled_model = std::make_shared<ScaledMlp>(device), eager_model = std::make_shared<ScaledMlp>(device);
  {
    auto group = std::make_shared<ProcessGroup>(distributed::Environment{}, InitOptions{});  // "auto": NCCL
    ASSERT_EQ(group->device(), device);
    auto compiled_zero_owner = stage2(compiled_model->parameters(), group);
    auto eager_zero_owner = stage2(eager_model->parameters(), group);
    ZeroRedundancyOptimizer &compiled_zero = *compiled_zero_owner, &eager_zero = *eager_zero_owner;
    auto loss_fn = [&](const Tensor& x, const Tensor& y) { return cross_entropy((*compiled_model)(x), y); };
    Compiled<decltype(loss_fn)> compiled(loss_fn, {.backend = "cudagraphs"});
    for (const auto& [x, y] : make_batches(5, device)) {
      compiled_zero.zero_grad();
      eager_zero.zero_grad();
      compiled(x, y).backward();
      cross_entropy((*eager_model)(x), y).backward();
      compiled_zero.step();
      eager_zero.step();
      expect_params_close(compiled_model->parameters(), eager_model->parameters(), 1e-5, 1e-6);
    }
    const auto& c = compiled.counters();
    EXPECT_EQ(c.compilations, 1);
    EXPECT_EQ(static_cast<size_t>(c.backward_ops.at("reduce_scatter")), bucket_count(compiled_zero));
  }
  const auto& g = graphs::global_counters();
  EXPECT_GT(g.replays, 0);
  EXPECT_EQ(g.eager_segments, 0) << "the reductions are captured with the rest of the backward";
}

}  // namespace
}  // namespace tg::distributed
