// Data parallelism in one process (a group of one): collectives as ops, DistributedDataParallel's
// buckets, hooks and no_sync(), and its reductions folded into compiled backward graphs. The same
// code on two GPUs is checked by test_ddp_multi_gpu.
#include <gtest/gtest.h>

#include "distributed/collectives/collectives.h"
#include "distributed/ddp/ddp.h"
#include "support/test_support.h"

namespace tg::distributed {
namespace {

// A group of one process for every test of this file (on cuda:0 when a GPU exists).
class SingleProcessGroup : public ::testing::Environment {
 public:
  void SetUp() override { init(distributed::Environment{}); }
  void TearDown() override { destroy(); }
};
const auto* const g_group = ::testing::AddGlobalTestEnvironment(new SingleProcessGroup);

Device test_device() { return default_group()->device(); }

std::shared_ptr<nn::Sequential> make_mlp(Device device, uint64_t seed = 0) {
  manual_seed(seed);
  auto m = std::make_shared<nn::Sequential>();
  m->push_back(std::make_shared<nn::Linear>(6, 32));
  m->push_back(std::make_shared<nn::ReLU>());
  m->push_back(std::make_shared<nn::Linear>(32, 4));
  m->to(device);
  return m;
}

TEST(Collectives, GroupOfOneReducesToItself) {
  EXPECT_EQ(rank(), 0);
  EXPECT_EQ(world_size(), 1);
  for (Device d : {kCPU, test_device()}) {
    Tensor x = randn({3, 4}, {.device = d});
    testing::expect_close(all_reduce(x, ReduceOp::Sum), x);
    testing::expect_close(all_reduce(x, ReduceOp::Avg), x);
    testing::expect_close(all_reduce(x, ReduceOp::Max), x);
    Tensor gathered = all_gather(x);
    EXPECT_EQ(gathered.sizes(), (Shape{1, 3, 4}));
    testing::expect_close(gathered[0], x);
    EXPECT_EQ(reduce_scatter(gathered).sizes(), (Shape{3, 4}));
    Tensor y = x.clone();
    all_reduce_(y, ReduceOp::Avg);
    broadcast_(y, 0);
    testing::expect_close(y, x);
  }
}

TEST(Collectives, BadArgumentsSayWhatWasExpected) {
  EXPECT_THROW_MSG(reduce_scatter(randn({3, 4})), "expected a leading dimension of 1 (the world size), got shape [3, 4]");
  EXPECT_THROW_MSG(all_reduce(ones({2}, {.dtype = kInt64}), ReduceOp::Avg), "avg needs a floating dtype, got int64");
  Tensor t = randn({2});
  EXPECT_THROW_MSG(broadcast_(t, 3), "root 3 is not a rank of a group of 1");
  Tensor strided = randn({4, 4}).t();
  EXPECT_THROW_MSG(all_reduce_(strided), "needs it contiguous");
  EXPECT_THROW_MSG(init(distributed::Environment{}), "init() was already called");
}

TEST(Collectives, Gradients) {
  testing::expect_gradcheck([](const TensorList& in) { return all_reduce(in[0], ReduceOp::Sum) * in[0]; },
                            {testing::random_tensor({3, 2}, kFloat64, true)});
  testing::expect_gradcheck([](const TensorList& in) { return all_reduce(in[0], ReduceOp::Avg).sin(); },
                            {testing::random_tensor({4}, kFloat64, true)});
  testing::expect_gradcheck([](const TensorList& in) { return all_gather(in[0]).exp(); },
                            {testing::random_tensor({2, 3}, kFloat64, true)});
  testing::expect_gradcheck([](const TensorList& in) { Tensor r = reduce_scatter(in[0], ReduceOp::Avg);
    return r * r; },
                            {testing::random_tensor({1, 5}, kFloat64, true)});
  Tensor x = randn({3}).requires_grad_(true);
  EXPECT_THROW_MSG(all_reduce(x, ReduceOp::Max).sum().backward(), "max is not differentiable");
}

TEST(Collectives, CudaMatchesCpu) {
  TG_REQUIRE_CUDA();
  testing::expect_cuda_matches_cpu([](const TensorList& in) { return all_reduce(in[0], ReduceOp::Avg); },
                                   {randn({5, 3})});
  testing::expect_cuda_matches_cpu([](const TensorList& in) { return reduce_scatter(all_gather(in[0])); },
                                   {randn({7})});
}

TEST(DistributedDataParallel, BucketsFollowReverseRegistrationOrderAndCaps) {
  auto m = std::make_shared<nn::Sequential>();
  m->push_back(std::make_shared<nn::Linear>(512, 512));   // 1 MiB weight
  m->push_back(std::make_shared<nn::Linear>(512, 1024));  // 2 MiB weight
  m->push_back(std::make_shared<nn::Linear>(1024, 8));
  nn::DistributedDataParallel ddp(m, {.process_group = default_group(), .bucket_cap_mb = 2.5});
  // The first bucket closes at 1 MiB, later ones at 2.5 MiB, PyTorch's rule (a bucket closes once
  // it reaches its cap).
  const std::vector<std::vector<std::string>> expected = {
      {"module.2.bias", "module.2.weight", "module.1.bias", "module.1.weight"},
      {"module.0.bias", "module.0.weight"}};
  EXPECT_EQ(ddp.bucket_names(), expected);
  EXPECT_EQ(ddp.named_parameters().front().first, "module.0.weight");
}

TEST(DistributedDataParallel, LastBucketCapSplitsOffTheFirstParameters) {
  auto m = std::make_shared<nn::Sequential>();
  m->push_back(std::make_shared<nn::Linear>(512, 512));   // 1 MiB weight
  m->push_back(std::make_shared<nn::Linear>(512, 1024));  // 2 MiB weight
  m->push_back(std::make_shared<nn::Linear>(1024, 8));
  using Names = std::vector<std::vector<std::string>>;
  // The fewest first parameters reaching 0.5 MiB (module.0.weight) are reduced last, alone.
  nn::DistributedDataParallel small_last(m, {.process_group = default_group(), .bucket_cap_mb = 2.5,
                                             .last_bucket_cap_mb = 0.5});
  EXPECT_EQ(small_last.bucket_names(),
            (Names{{"module.2.bias", "module.2.weight", "module.1.bias", "module.1.weight"},
                   {"module.0.bias"},
                   {"module.0.weight"}}));
  // Reaching 1.5 MiB takes module.0 and module.1.weight; a bucket of the last ones closes at the cap too.
  nn::DistributedDataParallel two_last(m, {.process_group = default_group(), .last_bucket_cap_mb = 1.5});
  EXPECT_EQ(two_last.bucket_names(),
            (Names{{"module.2.bias", "module.2.weight", "module.1.bias"},
                   {"module.1.weight"},
                   {"module.0.bias", "module.0.weight"}}));
  // A cap that every parameter together does not reach changes nothing.
  nn::DistributedDataParallel everything(m, {.process_group = default_group(), .bucket_cap_mb = 2.5,
                                             .last_bucket_cap_mb = 100});
  EXPECT_EQ(everything.bucket_names(), (Names{{"module.2.bias", "module.2.weight", "module.1.bias", "module.1.weight"},
                                              {"module.0.bias", "module.0.weight"}}));
  EXPECT_THROW_MSG(nn::DistributedDataParallel(m, {.process_group = default_group(), .last_bucket_cap_mb = -1}),
                   "last_bucket_cap_mb -1: expected a size >= 0");
}

TEST(DistributedDataParallel, BucketCapsCountTheReduceDtypesBytes) {
  auto m = std::make_shared<nn::Sequential>();
  m->push_back(std::make_shared<nn::Linear>(512, 256));   // 0.5 MiB weight in float32
  m->push_back(std::make_shared<nn::Linear>(256, 1024));  // 1 MiB weight in float32
  using Names = std::vector<std::vector<std::string>>;
  nn::DistributedDataParallel float32(m, {.process_group = default_group(), .first_bucket_cap_mb = 0.75});
  EXPECT_EQ(float32.bucket_names(),
            (Names{{"module.1.bias", "module.1.weight"}, {"module.0.bias", "module.0.weight"}}));
  // Travelling as bfloat16, module.1 is 0.5 MiB: the first bucket takes module.0 as well.
  nn::DistributedDataParallel compressed(m, {.process_group = default_group(), .first_bucket_cap_mb = 0.75,
                                             .reduce_dtype = kBFloat16});
  EXPECT_EQ(compressed.bucket_names(),
            (Names{{"module.1.bias", "module.1.weight", "module.0.bias", "module.0.weight"}}));
}

// reduce_dtype in a group of one: the average of one rank is its gradient, converted to the reduce
// dtype and back; eagerly and compiled (on a GPU: captured in the backward's CUDA graph).
void expect_reduce_dtype_round_trip(DType param_dtype, DType reduce_dtype, const CompileOptions* compile) {
  SCOPED_TRACE(std::string(dtype_name(param_dtype)) + " in " + std::string(dtype_name(reduce_dtype)) +
               (compile ? " " + compile->backend : " eager"));
  const Device device = test_device();
  auto plain = make_mlp(device), wrapped = make_mlp(device);
  plain->to(param_dtype);
  wrapped->to(param_dtype);
  auto ddp = std::make_shared<nn::DistributedDataParallel>(
      wrapped, nn::DistributedDataParallelOptions{.reduce_dtype = reduce_dtype});
  auto f = [&ddp](const Tensor& x) {
    Tensor out = ddp->forward(x);
    return (out * out).mean();
  };
  std::optional<Compiled<decltype(f)>> compiled;
  if (compile) compiled.emplace(f, *compile);
  manual_seed(5);
  for (int step = 0; step < 3; ++step) {
    Tensor x = randn({8, 6}, {.device = device}).to(param_dtype);
    plain->zero_grad();
    ddp->zero_grad();
    Tensor out = plain->forward(x);
    (out * out).mean().backward();
    (compiled ? (*compiled)(x) : f(x)).backward();
    const TensorList a = plain->parameters(), b = ddp->parameters();
    for (size_t k = 0; k < a.size(); ++k) {
      ASSERT_EQ(b[k].grad().dtype(), param_dtype);
      const Tensor expected = a[k].grad().to(reduce_dtype).to(param_dtype);
      testing::expect_close(b[k].grad().to(kFloat64), expected.to(kFloat64), 1e-6, 1e-7);
    }
  }
  if (compiled) EXPECT_EQ(compiled->counters().backward_ops.at("bucket_cast"), 1);
}

TEST(DistributedDataParallel, ReduceDtypeInAGroupOfOne) {
  const CompileOptions aot{.backend = "aot_eager"};
  for (const CompileOptions* c : {static_cast<const CompileOptions*>(nullptr), &aot}) {
    expect_reduce_dtype_round_trip(kBFloat16, kFloat32, c);
    expect_reduce_dtype_round_trip(kFloat32, kBFloat16, c);
  }
}

TEST(DistributedDataParallel, ReduceDtypeUnderCudaGraphs) {
  TG_REQUIRE_CUDA();
  const CompileOptions cg{.backend = "cudagraphs"};
  expect_reduce_dtype_round_trip(kBFloat16, kFloat32, &cg);
  expect_reduce_dtype_round_trip(kFloat32, kBFloat16, &cg);
}

// Eager and compiled DDP training steps match a plain model's (a group of one averages nothing).
void expect_ddp_matches_plain(const CompileOptions* compile, Device device) {
  auto plain = make_mlp(device), wrapped = make_mlp(device);
  auto ddp = std::make_shared<nn::DistributedDataParallel>(wrapped);
  auto loss_of = [](nn::Module& m) {
    return [&m](const Tensor& x, const Tensor& y) { return cross_entropy(m(x), y); };
  };
  auto plain_loss = loss_of(*plain);
  std::function<Tensor(const Tensor&, const Tensor&)> ddp_loss = loss_of(*ddp);
  std::shared_ptr<Compiled<decltype(loss_of(*ddp))>> compiled;
  if (compile) {
    compiled = std::make_shared<Compiled<decltype(loss_of(*ddp))>>(loss_of(*ddp), *compile);
    ddp_loss = [compiled](const Tensor& x, const Tensor& y) { return (*compiled)(x, y); };
  }
  optim::SGD sgd_plain(plain->parameters(), {.lr = 0.1}), sgd_ddp(ddp->parameters(), {.lr = 0.1});
  manual_seed(5);
  for (int step = 0; step < 4; ++step) {
    Tensor x = randn({8, 6}, {.device = device}), y = randint(0, 4, {8}, {.device = device});
    sgd_plain.zero_grad();
    sgd_ddp.zero_grad();
    plain_loss(x, y).backward();
    ddp_loss(x, y).backward();
    const TensorList a = plain->parameters(), b = ddp->parameters();
    for (size_t k = 0; k < a.size(); ++k) testing::expect_close(b[k].grad(), a[k].grad(), 1e-5, 1e-6);
    sgd_plain.step();
    sgd_ddp.step();
  }
  if (compiled) {
    const auto& c = compiled->counters();
    EXPECT_EQ(c.compilations, 1);
    EXPECT_EQ(c.backward_ops.count("bucket_average"), 1u);
    EXPECT_EQ(c.backward_ops.at("bucket_average"), 1) << "one bucket: the model is small";
  }
}

TEST(DistributedDataParallel, EagerMatchesPlainModel) { expect_ddp_matches_plain(nullptr, test_device()); }

TEST(DistributedDataParallel, CompiledFoldsBucketsIntoTheBackwardGraph) {
  const CompileOptions aot{.backend = "aot_eager"};
  expect_ddp_matches_plain(&aot, test_device());
}

TEST(DistributedDataParallel, CudaGraphsCaptureTheReductions) {
  TG_REQUIRE_CUDA();
  graphs::reset_global_counters();
  const CompileOptions cg{.backend = "cudagraphs"};
  expect_ddp_matches_plain(&cg, cuda_device(0));
  const auto c = graphs::global_counters();
  EXPECT_GT(c.replays, 0);
  EXPECT_EQ(c.eager_segments, 0) << "the bucket reductions are captured with the rest of the backward";
}

TEST(DistributedDataParallel, NoSyncAccumulatesLocallyAndRecompiles) {
  // Gradient accumulation: two micro-batches under no_sync(), then a synchronized one; the result
  // equals the plain model's accumulated gradients (the average of one rank is itself), eagerly and
  // compiled, and toggling no_sync() recompiles with the guard named.
  for (bool use_compile : {false, true}) {
    auto plain = make_mlp(kCPU), wrapped = make_mlp(kCPU);
    nn::DistributedDataParallel ddp(wrapped);
    auto f = [&ddp](const Tensor& x) {
      Tensor out = ddp(x);
      return (out * out).mean();
    };
    Compiled<decltype(f)> compiled(f, {.backend = "aot_eager"});
    manual_seed(9);
    for (int micro = 0; micro < 3; ++micro) {
      Tensor x = randn({5, 6});
      Tensor out = plain->forward(x);
      (out * out).mean().backward();
      if (micro < 2) {
        auto no_sync = ddp.no_sync();
        (use_compile ? compiled(x) : f(x)).backward();
      } else {
        (use_compile ? compiled(x) : f(x)).backward();
      }
    }
    const TensorList a = plain->parameters(), b = ddp.parameters();
    for (size_t k = 0; k < a.size(); ++k) testing::expect_close(b[k].grad(), a[k].grad(), 1e-5, 1e-6);
    if (use_compile) {
      const auto& c = compiled.counters();
      EXPECT_EQ(c.compilations, 2);
      ASSERT_EQ(c.recompile_reasons.size(), 1u);
      EXPECT_NE(c.recompile_reasons[0].find("require_backward_grad_sync"), std::string::npos) << c.recompile_reasons[0];
    }
  }
}

TEST(DistributedDataParallel, ReductionsAreScheduledAsSoonAsTheirGradientsExist) {
  // Two buckets: the last layer's gradients are reduced while the first layer's backward still runs.
  auto m = std::make_shared<nn::Sequential>();
  m->push_back(std::make_shared<nn::Linear>(64, 1024));
  m->push_back(std::make_shared<nn::ReLU>());
  m->push_back(std::make_shared<nn::Linear>(1024, 512));
  nn::DistributedDataParallel ddp(m, {.process_group = default_group(), .first_bucket_cap_mb = 1.0});
  ASSERT_EQ(ddp.bucket_names().size(), 2u);
  auto f = [&ddp](const Tensor& x) { return ddp(x).sum(); };
  Compiled<decltype(f)> compiled(f, {.backend = "aot_eager"});
  compiled(randn({4, 64})).backward();
  const graphs::Graph& bw = compiled.last_partition()->backward;
  std::vector<size_t> collectives, matmuls;
  for (size_t i = 0; i < bw.nodes.size(); ++i) {
    const std::string_view name = bw.nodes[i].op->name();
    if (name == "bucket_average") collectives.push_back(i);
    if (name == "mm" || name == "matmul" || name == "addmm") matmuls.push_back(i);
  }
  ASSERT_EQ(collectives.size(), 2u);
  ASSERT_FALSE(matmuls.empty());
  std::string order;
  for (const auto& n : bw.nodes) order += std::string(n.op->name()) + " ";
  EXPECT_LT(collectives[0], matmuls.back()) << "the first bucket waits for no later matmul: " << order;
}

TEST(DistributedDataParallel, ConversionsBackComeAfterTheBackwardsWork) {
  // With reduce_dtype the reductions still start early; the bucket_casts (which wait for them) come
  // after every matmul of the backward, so waiting does not stall the rest of the backward.
  auto m = std::make_shared<nn::Sequential>();
  m->push_back(std::make_shared<nn::Linear>(64, 1024));
  m->push_back(std::make_shared<nn::ReLU>());
  m->push_back(std::make_shared<nn::Linear>(1024, 512));
  nn::DistributedDataParallel ddp(m, {.process_group = default_group(), .first_bucket_cap_mb = 0.5,
                                      .reduce_dtype = kBFloat16});
  ASSERT_EQ(ddp.bucket_names().size(), 2u);
  auto f = [&ddp](const Tensor& x) { return ddp(x).sum(); };
  Compiled<decltype(f)> compiled(f, {.backend = "aot_eager"});
  compiled(randn({4, 64})).backward();
  const graphs::Graph& bw = compiled.last_partition()->backward;
  std::vector<size_t> collectives, casts, matmuls;
  std::string order;
  for (size_t i = 0; i < bw.nodes.size(); ++i) {
    const std::string_view name = bw.nodes[i].op->name();
    order += std::string(name) + " ";
    if (name == "bucket_average") collectives.push_back(i);
    if (name == "bucket_cast") casts.push_back(i);
    if (name == "mm" || name == "matmul" || name == "addmm") matmuls.push_back(i);
  }
  ASSERT_EQ(collectives.size(), 2u) << order;
  ASSERT_EQ(casts.size(), 2u) << order;
  ASSERT_FALSE(matmuls.empty());
  EXPECT_LT(collectives[0], matmuls.back()) << order;
  EXPECT_GT(casts.front(), std::max(collectives.back(), matmuls.back())) << order;
}

TEST(DistributedDataParallel, UnusedParameterIsAnErrorAtTheNextForward) {
  auto m = make_mlp(kCPU);
  nn::DistributedDataParallel ddp(m);
  Tensor x = randn({2, 6});
  (void)ddp(x);
  m->parameters().back().sum().backward();  // only the last bias gets a gradient: its bucket never completes
  EXPECT_THROW_MSG(ddp(x), "produced no gradient for module.0.weight, module.0.bias, module.2.weight");
  m->zero_grad();
  ddp(x).sum().backward();  // the next step starts clean
  for (const Tensor& p : m->parameters()) EXPECT_TRUE(p.grad().defined());
}

}  // namespace
}  // namespace tg::distributed
