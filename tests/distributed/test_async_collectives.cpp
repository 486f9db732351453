// Asynchronous collectives (all_gather_async, reduce_scatter_async) and their explicit wait,
// collective_wait. On the CPU backend, where they are synchronous, they equal the synchronous
// collectives on 1 to 3 ranks as threads and have their gradients; under compile() the wait is a
// graph node between the collective and its first reader, the scheduling pass keeps at most two
// collectives in flight (ZeRO stage 2's bucket reductions included), and a tensor that aliases a
// waited result reads it after the wait. On a GPU (a group of one on NCCL, where they run on NCCL's
// stream) they equal the synchronous ones when read right after the call, inside compile() and in
// CUDA graphs replayed with changing inputs. ZeRO stage 2 and fully_shard, which use them, train
// eagerly and compiled (aot_eager on the CPU, cudagraphs on a GPU) to the losses of one process.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <string_view>

#include "distributed/collectives/collectives.h"
#include "distributed/fsdp/fsdp.h"
#include "distributed/zero/zero_optimizer.h"
#include "support/test_support.h"
#include "support/thread_ranks.h"

namespace tg::distributed {
namespace {

using testing::run_ranks;

std::shared_ptr<ProcessGroup> handle(ProcessGroup& g) { return {&g, [](ProcessGroup*) {}}; }

// The nodes of `g` named `name`, in run order.
std::vector<size_t> nodes_named(const graphs::Graph& g, std::string_view name) {
  std::vector<size_t> out;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (g.nodes[i].op->name() == name) out.push_back(i);
  return out;
}

// The node that computes input `k` of node `i` (-1 for a graph input).
int32_t producer(const graphs::Graph& g, size_t i, size_t k = 0) {
  const graphs::ValueId v = g.nodes[i].inputs[k];
  return v < 0 ? -1 : g.values[static_cast<size_t>(v)].producer;
}

TEST(AsyncCollectives, EqualTheSynchronousOnes) {
  for (int world : {1, 2, 3}) {
    SCOPED_TRACE("world " + std::to_string(world));
    run_ranks(world, [&](ProcessGroup& group) {
      const auto g = handle(group);
      const Tensor x = arange(0, world * 15, 1).view({world, 5, 3}) * (group.rank() + 1.0) - 7.0;
      testing::expect_close(collective_wait(all_gather_async(x, g)), all_gather(x, g), 0.0, 0.0);
      for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max})
        testing::expect_close(collective_wait(reduce_scatter_async(x, op, g)), reduce_scatter(x, op, g), 0.0, 0.0);
    });
  }
}

TEST(AsyncCollectives, GradientsAreTheOtherCollectiveWaitedFor) {
  auto group = std::make_unique<ProcessGroup>(Environment{}, testing::thread_rank_options());
  const auto g = handle(*group);
  testing::expect_gradcheck([&](const TensorList& in) { return collective_wait(all_gather_async(in[0], g)).exp(); },
                            {testing::random_tensor({2, 3}, kFloat64, true)});
  testing::expect_gradcheck(
      [&](const TensorList& in) {
        const Tensor r = collective_wait(reduce_scatter_async(in[0], ReduceOp::Avg, g));
        return r * r;
      },
      {testing::random_tensor({1, 5}, kFloat64, true)});
  // Two ranks: every rank's loss reads the whole gather, so rank r's gradient is the sum over ranks
  // of the weights of block r.
  run_ranks(2, [&](ProcessGroup& two) {
    const int r = two.rank();
    const auto opts = TensorOptions{.dtype = kFloat64};
    const Tensor x = (arange(0, 3, 1, opts) + 10.0 * r).requires_grad_(true);
    const Tensor w = arange(0, 6, 1, opts).view({2, 3});
    (collective_wait(all_gather_async(x, handle(two))) * w).sum().backward();
    testing::expect_close(x.grad(), w[r] * 2.0, 0.0, 0.0);
  });
}

TEST(AsyncCollectives, CompiledWaitIsANodeBetweenTheCollectiveAndItsReader) {
  auto group = std::make_unique<ProcessGroup>(Environment{}, testing::thread_rank_options());
  const auto g = handle(*group);
  auto fn = [g](const Tensor& x) {
    const Tensor r = reduce_scatter_async(x * 2.0, ReduceOp::Sum, g);
    const Tensor other = (x + 1.0).sum();  // runs while the reduction is in flight
    return collective_wait(r) * 3.0 + other;
  };
  auto compiled = compile(fn, {.backend = "aot_eager"});
  for (int step = 0; step < 3; ++step) {
    const Tensor x = randn({1, 4, 5});
    testing::expect_close(compiled(x), fn(x), 1e-6, 1e-6);
  }
  EXPECT_EQ(compiled.counters().compilations, 1);
  const graphs::Graph& fw = compiled.last_partition()->forward;
  const std::vector<size_t> collectives = nodes_named(fw, "reduce_scatter"), waits = nodes_named(fw, "collective_wait");
  ASSERT_EQ(collectives.size(), 1u) << fw.to_text();
  ASSERT_EQ(waits.size(), 1u) << fw.to_text();
  EXPECT_EQ(producer(fw, waits[0]), static_cast<int32_t>(collectives[0]));
  EXPECT_GT(waits[0], nodes_named(fw, "sum").at(0)) << "the independent work comes first\n" << fw.to_text();
  size_t readers = 0;
  for (size_t i = 0; i < fw.nodes.size(); ++i) {
    if (i == waits[0]) continue;
    for (size_t k = 0; k < fw.nodes[i].inputs.size(); ++k) {
      if (producer(fw, i, k) != static_cast<int32_t>(collectives[0])) continue;
      ADD_FAILURE() << "node " << i << " reads the collective's result without the wait\n" << fw.to_text();
    }
    if (!fw.nodes[i].inputs.empty() && producer(fw, i) == static_cast<int32_t>(waits[0])) ++readers;
  }
  EXPECT_EQ(readers, 1u);
}

TEST(AsyncCollectives, SchedulingKeepsAtMostTwoCollectivesInFlight) {
  // Five reductions traced first and read last: each wait moves before the reduction issued two later.
  auto group = std::make_unique<ProcessGroup>(Environment{}, testing::thread_rank_options());
  const auto g = handle(*group);
  auto fn = [g](const Tensor& x) {
    TensorList pending;
    for (int k = 0; k < 5; ++k) pending.push_back(reduce_scatter_async(x * (k + 1.0), ReduceOp::Sum, g));
    Tensor total = zeros({4});
    for (const Tensor& r : pending) total = total + collective_wait(r);
    return total;
  };
  auto compiled = compile(fn, {.backend = "aot_eager"});
  const Tensor x = randn({1, 4});
  testing::expect_close(compiled(x), fn(x), 1e-6, 1e-6);
  const graphs::Graph& fw = compiled.last_partition()->forward;
  const std::vector<size_t> collectives = nodes_named(fw, "reduce_scatter"), waits = nodes_named(fw, "collective_wait");
  ASSERT_EQ(collectives.size(), 5u) << fw.to_text();
  ASSERT_EQ(waits.size(), 5u) << fw.to_text();
  for (size_t w : waits) {
    const auto it = std::find(collectives.begin(), collectives.end(), static_cast<size_t>(producer(fw, w)));
    ASSERT_NE(it, collectives.end()) << fw.to_text();
    const size_t j = static_cast<size_t>(it - collectives.begin());
    EXPECT_GT(w, collectives[j]);
    if (j + 2 < collectives.size()) EXPECT_LT(w, collectives[j + 2]) << "wait of reduction " << j << "\n" << fw.to_text();
  }
}

TEST(AsyncCollectives, AnAliasOfAWaitedResultReadsAfterTheWait) {
  // A tensor made over the waited result's memory (as fully_shard points its parameters at a gather)
  // is regenerated from the storage's value after the wait, not from the collective's.
  auto group = std::make_unique<ProcessGroup>(Environment{}, testing::thread_rank_options());
  const auto g = handle(*group);
  auto fn = [g](const Tensor& x) {
    const Tensor full = collective_wait(all_gather_async(x, g));
    const Tensor flat(std::make_shared<TensorImpl>(full.impl()->storage(), Shape{x.numel()}, Shape{1}, 0, x.dtype()));
    return flat * 2.0;
  };
  auto compiled = compile(fn, {.backend = "aot_eager"});
  const Tensor x = randn({2, 3});
  testing::expect_close(compiled(x), x.reshape({-1}) * 2.0, 0.0, 0.0);
  const graphs::Graph& fw = compiled.last_partition()->forward;
  const std::vector<size_t> aliases = nodes_named(fw, "alias_view");
  ASSERT_EQ(aliases.size(), 1u) << fw.to_text();
  const int32_t base = producer(fw, aliases[0]);
  ASSERT_GE(base, 0) << fw.to_text();
  EXPECT_EQ(fw.nodes[static_cast<size_t>(base)].op->name(), "collective_wait") << fw.to_text();
}

TEST(AsyncCollectives, ZeroStage2WaitsKeepTwoBucketsInFlight) {
  // The compiled backward reduces each bucket asynchronously and waits for it before the reduction
  // issued two later, not at the end of the graph.
  auto group = std::make_unique<ProcessGroup>(Environment{}, testing::thread_rank_options());
  manual_seed(0);
  auto model = std::make_shared<nn::Sequential>();
  model->push_back(std::make_shared<nn::Linear>(6, 32));
  model->push_back(std::make_shared<nn::ReLU>());
  model->push_back(std::make_shared<nn::Linear>(32, 16));
  model->push_back(std::make_shared<nn::ReLU>());
  model->push_back(std::make_shared<nn::Linear>(16, 16));
  model->push_back(std::make_shared<nn::ReLU>());
  model->push_back(std::make_shared<nn::Linear>(16, 4));
  ZeroRedundancyOptimizer zero(model->parameters(), optimizer_class<optim::SGD>(optim::SGDOptions{.lr = 0.1}),
                               {.process_group = handle(*group), .stage = 2, .bucket_cap_mb = 0.0002});
  size_t buckets = 0;
  for (const ZeroGroup& zg : zero.layout().groups) buckets += zg.buckets.size();
  ASSERT_GT(buckets, 3u);
  auto step = compile([&](const Tensor& x, const Tensor& y) { return cross_entropy((*model)(x), y); },
                      {.backend = "aot_eager"});
  zero.zero_grad();
  step(randn({8, 6}), randint(0, 4, {8})).backward();
  const graphs::Graph& bw = step.last_partition()->backward;
  const std::vector<size_t> collectives = nodes_named(bw, "reduce_scatter"), waits = nodes_named(bw, "collective_wait");
  ASSERT_EQ(collectives.size(), buckets) << bw.to_text();
  ASSERT_EQ(waits.size(), buckets) << bw.to_text();
  for (size_t j = 0; j + 2 < collectives.size(); ++j) {
    const auto w = std::find_if(waits.begin(), waits.end(),
                                [&](size_t i) { return producer(bw, i) == static_cast<int32_t>(collectives[j]); });
    ASSERT_NE(w, waits.end()) << bw.to_text();
    EXPECT_LT(*w, collectives[j + 2]) << "bucket " << j << "\n" << bw.to_text();
  }
}

// A group of one on NCCL, for the tests below (which skip without a CUDA device).
std::unique_ptr<ProcessGroup> nccl_group_of_one() {
  InitOptions options;
  options.backend = "nccl";
  return std::make_unique<ProcessGroup>(Environment{}, options);
}

TEST(AsyncCollectivesCuda, ReadRightAfterTheCallEqualTheSynchronousOnes) {
  TG_REQUIRE_CUDA();
  auto group = nccl_group_of_one();
  const auto g = handle(*group);
  const Device device = group->device();
  // Large enough that a read racing the collective would see the old contents of the result's memory
  // (the previous round's freed blocks).
  for (int round = 0; round < 4; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    const Tensor x = randn({1, 1 << 22}, {.device = device});
    const Tensor gathered = collective_wait(all_gather_async(x, g)) * 2.0;
    const Tensor reduced = collective_wait(reduce_scatter_async(x, ReduceOp::Avg, g)) - 1.0;
    testing::expect_close(gathered, all_gather(x, g) * 2.0, 0.0, 0.0);
    testing::expect_close(reduced, reduce_scatter(x, ReduceOp::Avg, g) - 1.0, 0.0, 0.0);
    // The wait is joined once; a second wait (or one on a tensor no collective writes) does nothing.
    const Tensor again = all_gather_async(x, g);
    testing::expect_close(collective_wait(collective_wait(again)), x.view({1, 1, 1 << 22}), 0.0, 0.0);
    testing::expect_close(collective_wait(x), x, 0.0, 0.0);
  }
}

// ZeRO's pattern and a gradient: blocks reduced and gathered asynchronously, waited for and
// concatenated inside the graph after independent work.
Tensor mixed_collectives(const Tensor& a, const Tensor& b, const Tensor& w, const std::shared_ptr<ProcessGroup>& g) {
  const Tensor reduced = reduce_scatter_async(a * 2.0, ReduceOp::Avg, g);
  const Tensor gathered = all_gather_async(b + 1.0, g);
  const Tensor busy = matmul(a[0], a[0].t()).sum();
  const Tensor both = cat({collective_wait(reduced).reshape({-1}), collective_wait(gathered).reshape({-1})});
  return (both * w).sum() + busy;
}

Tensor mixed_reference(const Tensor& a, const Tensor& b, const Tensor& w, const std::shared_ptr<ProcessGroup>& g) {
  const Tensor both = cat({reduce_scatter(a * 2.0, ReduceOp::Avg, g).reshape({-1}), all_gather(b + 1.0, g).reshape({-1})});
  return (both * w).sum() + matmul(a[0], a[0].t()).sum();
}

TEST(AsyncCollectivesCuda, CompiledAndCapturedGraphsMatchEager) {
  TG_REQUIRE_CUDA();
  auto group = nccl_group_of_one();
  const auto g = handle(*group);
  const Device device = group->device();
  for (const char* backend : {"aot_eager", "cudagraphs"}) {
    SCOPED_TRACE(backend);
    graphs::reset_global_counters();
    auto fn = [g](const Tensor& a, const Tensor& b, const Tensor& w) { return mixed_collectives(a, b, w, g); };
    auto compiled = compile(fn, {.backend = backend});
    for (int step = 0; step < 5; ++step) {
      SCOPED_TRACE("step " + std::to_string(step));
      const Tensor a = randn({1, 256, 256}, {.device = device}).requires_grad_(true);
      const Tensor b = randn({512, 128}, {.device = device}).requires_grad_(true);
      const Tensor w = randn({256 * 256 + 512 * 128}, {.device = device});
      const Tensor got = compiled(a, b, w);
      got.backward();
      const Tensor a_ref = a.detach().clone().requires_grad_(true), b_ref = b.detach().clone().requires_grad_(true);
      const Tensor want = mixed_reference(a_ref, b_ref, w, g);
      want.backward();
      testing::expect_close(got, want, 1e-5, 1e-3);
      testing::expect_close(a.grad(), a_ref.grad(), 1e-4, 1e-4);
      testing::expect_close(b.grad(), b_ref.grad(), 1e-4, 1e-4);
    }
    const auto& c = compiled.counters();
    EXPECT_EQ(c.compilations, 1);
    EXPECT_EQ(c.forward_ops.at("collective_wait"), 2);
    EXPECT_EQ(c.backward_ops.at("collective_wait"), 2) << "the gradients' collectives are waited for too";
    if (std::string_view(backend) == "cudagraphs") {
      EXPECT_GT(c.replays, 0);
      EXPECT_EQ(graphs::global_counters().eager_segments, 0) << "the collectives and waits are captured";
    }
  }
}

// Linear-Tanh layers and a head on `device`, from seed 0.
std::shared_ptr<nn::Sequential> make_mlp(Device device) {
  manual_seed(0);
  auto m = std::make_shared<nn::Sequential>();
  m->push_back(std::make_shared<nn::Linear>(6, 32));
  m->push_back(std::make_shared<nn::Tanh>());
  m->push_back(std::make_shared<nn::Linear>(32, 32));
  m->push_back(std::make_shared<nn::Tanh>());
  m->push_back(std::make_shared<nn::Linear>(32, 4));
  m->to(device);
  return m;
}

const optim::SGDOptions kSgd{.lr = 0.1, .momentum = 0.9};

using Batches = std::vector<std::pair<Tensor, Tensor>>;

// One pass over `batches` with `opt` (zero_grad, loss_of, backward, step); returns the losses.
template <typename Optimizer>
std::vector<double> train(Optimizer& opt, const Batches& batches,
                          const std::function<Tensor(const Tensor&, const Tensor&)>& loss_of) {
  std::vector<double> losses;
  for (const auto& [x, y] : batches) {
    opt.zero_grad();
    const Tensor loss = loss_of(x, y);
    loss.backward();
    opt.step();
    losses.push_back(loss.item<double>());
  }
  return losses;
}

// ZeRO stage 2 (buckets reduced and waited for two in flight) and fully_shard (gathers prefetched
// one unit ahead, gradients reduced asynchronously), eagerly and compiled with `backend`, on
// `group` (of one): the losses and parameters of plain SGD on the same model and batches.
void expect_sharded_training_matches_one_process(ProcessGroup& group, const std::string& backend) {
  const Device device = group.device();
  Batches batches;
  manual_seed(7);
  for (int s = 0; s < 6; ++s) batches.emplace_back(randn({8, 6}).to(device), randint(0, 4, {8}).to(device));

  std::vector<double> reference;
  std::map<std::string, Tensor> reference_params;
  {
    auto model = make_mlp(device);
    optim::SGD opt(model->parameters(), kSgd);
    reference = train(opt, batches, [&](const Tensor& x, const Tensor& y) { return cross_entropy((*model)(x), y); });
    for (const auto& [name, p] : model->named_parameters()) reference_params[name] = p.detach().clone();
  }
  auto expect_matches = [&](const std::vector<double>& losses, const std::map<std::string, Tensor>& params) {
    ASSERT_EQ(losses.size(), reference.size());
    for (size_t s = 0; s < losses.size(); ++s) EXPECT_NEAR(losses[s], reference[s], 1e-5) << "step " << s;
    for (const auto& [name, p] : reference_params) {
      ASSERT_TRUE(params.count(name)) << name;
      testing::expect_close(params.at(name), p, 1e-4, 1e-5);
    }
  };

  for (bool compiled : {false, true}) {
    SCOPED_TRACE(compiled ? "ZeRO stage 2, " + backend : "ZeRO stage 2, eager");
    auto model = make_mlp(device);
    ZeroRedundancyOptimizer zero(model->parameters(), optimizer_class<optim::SGD>(kSgd),
                                 {.process_group = handle(group), .stage = 2, .bucket_cap_mb = 0.002});
    auto step = compile([&](const Tensor& x, const Tensor& y) { return cross_entropy((*model)(x), y); },
                        {.backend = backend});
    const std::vector<double> losses = train(zero, batches, [&](const Tensor& x, const Tensor& y) {
      return compiled ? step(x, y) : cross_entropy((*model)(x), y);
    });
    std::map<std::string, Tensor> params;
    for (const auto& [name, p] : model->named_parameters()) params[name] = p.detach().clone();
    expect_matches(losses, params);
    if (compiled) EXPECT_EQ(step.counters().compilations, 1);
  }

  for (bool compiled : {false, true}) {
    SCOPED_TRACE(compiled ? "fully_shard, " + backend : "fully_shard, eager");
    auto model = make_mlp(device);
    // The first two layers are units of their own; the root's unit holds the head.
    std::vector<nn::Module*> layers;
    for (const auto& [name, m] : model->named_modules())
      if (m->type_name() == "Linear") layers.push_back(m);
    ASSERT_EQ(layers.size(), 3u);
    for (size_t k = 0; k + 1 < layers.size(); ++k) fully_shard(*layers[k], {.group = handle(group)});
    fully_shard(*model, {.group = handle(group)});
    optim::SGD opt(sharded_parameters(*model), kSgd);
    auto step = compile([&](const Tensor& x, const Tensor& y) { return cross_entropy((*model)(x), y); },
                        {.backend = backend});
    const std::vector<double> losses = train(opt, batches, [&](const Tensor& x, const Tensor& y) {
      return compiled ? step(x, y) : cross_entropy((*model)(x), y);
    });
    expect_matches(losses, full_state_dict(*model));
    if (compiled) EXPECT_EQ(step.counters().compilations, 1);
  }
}

TEST(AsyncCollectives, ShardedTrainingMatchesOneProcess) {
  auto group = std::make_unique<ProcessGroup>(Environment{}, testing::thread_rank_options());
  expect_sharded_training_matches_one_process(*group, "aot_eager");
}

TEST(AsyncCollectivesCuda, ShardedTrainingMatchesOneProcess) {
  TG_REQUIRE_CUDA();
  auto group = nccl_group_of_one();
  expect_sharded_training_matches_one_process(*group, "cudagraphs");
}

}  // namespace
}  // namespace tg::distributed
