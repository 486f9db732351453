// DistributedDataParallelOptions::reduce_dtype over 2 and 3 ranks of the CPU backend, ranks as
// threads of this process: bfloat16/float16 gradients averaged in float32, and float32 gradients
// averaged in bfloat16 (compressed), eagerly and compiled (aot_eager), against the average of each
// rank's local gradients computed in float64 by its definition.
#include <gtest/gtest.h>

#include <optional>

#include "distributed/collectives/collectives.h"
#include "distributed/ddp/ddp.h"
#include "support/test_support.h"
#include "support/thread_ranks.h"

namespace tg::distributed {
namespace {

using testing::run_ranks;

constexpr int64_t kRows = 12;  // the whole batch: divides evenly over 2 and 3 ranks

std::shared_ptr<nn::Sequential> make_mlp(DType dtype) {
  manual_seed(0);
  auto m = std::make_shared<nn::Sequential>();
  m->push_back(std::make_shared<nn::Linear>(6, 32));
  m->push_back(std::make_shared<nn::Tanh>());
  m->push_back(std::make_shared<nn::Linear>(32, 4));
  m->to(dtype);
  return m;
}

std::shared_ptr<ProcessGroup> handle(ProcessGroup& g) { return {&g, [](ProcessGroup*) {}}; }

Tensor loss_of(nn::Module& m, const Tensor& x) {
  Tensor out = m.forward(x);
  return (out * out).mean();
}

// Rank r's rows of the batch.
Tensor rows(const Tensor& x, int rank, int world) {
  const int64_t n = kRows / world;
  return x.narrow(0, rank * n, n).contiguous();
}

// The local gradients of a plain model on rank r's rows (the reduction's inputs), in parameters()
// order, computed the way the ranks compute them (eagerly, or through an aot_eager compile).
std::vector<TensorList> local_grads(DType dtype, const Tensor& x, int world, bool compiled) {
  std::vector<TensorList> out;
  for (int r = 0; r < world; ++r) {
    auto m = make_mlp(dtype);
    auto f = [&m](const Tensor& in) { return loss_of(*m, in); };
    Compiled<decltype(f)> c(f, {.backend = "aot_eager"});
    const Tensor xr = rows(x, r, world);
    (compiled ? c(xr) : f(xr)).backward();
    TensorList grads;
    for (const Tensor& p : m->parameters()) grads.push_back(p.grad().clone());
    out.push_back(grads);
  }
  return out;
}

// The float64 definition: the mean over ranks of each rank's gradient as it travels (converted to
// `wire`), rounded once to `wire` (the reduction's dtype) and then to `grad_dtype`.
TensorList expected_average(const std::vector<TensorList>& locals, DType wire, DType grad_dtype) {
  TensorList out;
  for (size_t k = 0; k < locals[0].size(); ++k) {
    Tensor sum = zeros(locals[0][k].sizes(), {.dtype = kFloat64});
    for (const TensorList& g : locals) sum = sum + g[k].to(wire).to(kFloat64);
    out.push_back((sum / static_cast<double>(locals.size())).to(wire).to(grad_dtype));
  }
  return out;
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  return (a.to(kFloat64) - b.to(kFloat64)).abs().amax().item<double>();
}

// Every rank trains through DistributedDataParallel with `reduce_dtype` on its rows; each rank's
// gradients must equal `expected` exactly (every rank ends with the same bits).
void expect_reduction(DType param_dtype, std::optional<DType> reduce_dtype, int world, bool compiled) {
  SCOPED_TRACE(std::string(dtype_name(param_dtype)) + " reduced in " +
               std::string(reduce_dtype ? dtype_name(*reduce_dtype) : "its own dtype") + ", world " +
               std::to_string(world) + (compiled ? ", aot_eager" : ", eager"));
  manual_seed(3);
  const Tensor x = randn({kRows, 6}).to(param_dtype);
  const auto locals = local_grads(param_dtype, x, world, compiled);
  const TensorList expected = expected_average(locals, reduce_dtype.value_or(param_dtype), param_dtype);
  std::vector<std::shared_ptr<nn::Sequential>> models;
  for (int r = 0; r < world; ++r) models.push_back(make_mlp(param_dtype));
  std::vector<std::map<std::string, int>> backward_ops(static_cast<size_t>(world));
  run_ranks(world, [&](ProcessGroup& group) {
    const int r = group.rank();
    auto ddp = std::make_shared<nn::DistributedDataParallel>(
        models[r], nn::DistributedDataParallelOptions{.process_group = handle(group), .reduce_dtype = reduce_dtype});
    auto f = [&ddp](const Tensor& in) { return loss_of(*ddp, in); };
    Compiled<decltype(f)> c(f, {.backend = "aot_eager"});
    const Tensor xr = rows(x, r, world);
    for (int step = 0; step < 2; ++step) {  // the second step reuses the compiled graph
      ddp->zero_grad();
      (compiled ? c(xr) : f(xr)).backward();
      const TensorList params = ddp->parameters();
      for (size_t k = 0; k < params.size(); ++k) {
        ASSERT_EQ(params[k].grad().dtype(), param_dtype);
        EXPECT_EQ(max_abs_diff(params[k].grad(), expected[k]), 0.0) << "rank " << r << " parameter " << k;
      }
    }
    if (compiled) backward_ops[r] = c.counters().backward_ops;
  });
  if (!compiled) return;
  for (const auto& ops : backward_ops) {
    EXPECT_EQ(ops.count("bucket_average") ? ops.at("bucket_average") : 0, 1);
    const bool converts = reduce_dtype && *reduce_dtype != param_dtype;
    EXPECT_EQ(ops.count("bucket_cast") ? ops.at("bucket_cast") : 0, converts ? 1 : 0)
        << "one conversion back per bucket, after the reductions";
  }
}

TEST(DdpReduceDtype, SixteenBitGradientsAveragedInFloat32) {
  for (bool compiled : {false, true}) {
    for (int world : {2, 3}) expect_reduction(kBFloat16, kFloat32, world, compiled);
    expect_reduction(kFloat16, kFloat32, 2, compiled);
  }
}

TEST(DdpReduceDtype, Float32GradientsCompressedToBFloat16) {
  for (bool compiled : {false, true})
    for (int world : {2, 3}) expect_reduction(kFloat32, kBFloat16, world, compiled);
}

TEST(DdpReduceDtype, TheUnsetDefaultReducesInTheGradientsDtype) {
  for (bool compiled : {false, true}) expect_reduction(kFloat32, std::nullopt, 2, compiled);
}

TEST(DdpReduceDtype, GradientsAccumulatedUnderNoSyncAreAveragedInTheReduceDtype) {
  // A micro-batch under no_sync(), then a synchronized compiled one: the local sum of the first is
  // averaged in bfloat16 before the graph's (also bfloat16) average of the second is added.
  const int world = 2;
  manual_seed(6);
  const Tensor x1 = randn({kRows, 6}), x2 = randn({kRows, 6});
  const TensorList first = expected_average(local_grads(kFloat32, x1, world, true), kBFloat16, kFloat32);
  const TensorList second = expected_average(local_grads(kFloat32, x2, world, true), kBFloat16, kFloat32);
  std::vector<std::shared_ptr<nn::Sequential>> models;
  for (int r = 0; r < world; ++r) models.push_back(make_mlp(kFloat32));
  run_ranks(world, [&](ProcessGroup& group) {
    const int r = group.rank();
    auto ddp = std::make_shared<nn::DistributedDataParallel>(
        models[r], nn::DistributedDataParallelOptions{.process_group = handle(group), .reduce_dtype = kBFloat16});
    auto f = [&ddp](const Tensor& in) { return loss_of(*ddp, in); };
    Compiled<decltype(f)> c(f, {.backend = "aot_eager"});
    {
      auto no_sync = ddp->no_sync();
      c(rows(x1, r, world)).backward();
    }
    c(rows(x2, r, world)).backward();
    const TensorList params = ddp->parameters();
    for (size_t k = 0; k < params.size(); ++k)
      EXPECT_EQ(max_abs_diff(params[k].grad(), first[k].to(kFloat64) + second[k].to(kFloat64)), 0.0)
          << "rank " << r << " parameter " << k;
  });
}

TEST(DdpReduceDtype, CompressionRoundsTheAverageToBFloat16) {
  // The check the comparisons above rest on: compressed averages are bfloat16 numbers and differ
  // from the float32 average, so a reduction that ignored reduce_dtype would fail them.
  manual_seed(3);
  const Tensor x = randn({kRows, 6});
  const auto locals = local_grads(kFloat32, x, 2, false);
  const TensorList compressed = expected_average(locals, kBFloat16, kFloat32);
  const TensorList exact = expected_average(locals, kFloat32, kFloat32);
  double differs = 0;
  for (size_t k = 0; k < exact.size(); ++k) {
    EXPECT_EQ(max_abs_diff(compressed[k], compressed[k].to(kBFloat16)), 0.0);
    differs = std::max(differs, max_abs_diff(compressed[k], exact[k]));
  }
  EXPECT_GT(differs, 0.0);
}

TEST(DdpReduceDtype, TheBucketsTravelInTheReduceDtype) {
  // Ranks that disagree on reduce_dtype issue buckets of different dtypes: the CPU backend names
  // both, which shows that a bfloat16 model's buckets travel as float32.
  auto models = std::vector{make_mlp(kBFloat16), make_mlp(kBFloat16)};
  manual_seed(4);
  const Tensor x = randn({kRows, 6}).to(kBFloat16);
  const auto errors = testing::run_ranks_collecting(2, [&](ProcessGroup& group) {
    const int r = group.rank();
    const std::optional<DType> reduce_dtype = r == 0 ? std::optional<DType>(kFloat32) : std::nullopt;
    nn::DistributedDataParallel ddp(models[r], {.process_group = handle(group), .reduce_dtype = reduce_dtype});
    loss_of(ddp, rows(x, r, 2)).backward();
  });
  std::string messages;
  for (const auto& e : errors) {
    if (!e) continue;
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& ex) {
      messages += std::string(ex.what()) + "\n";
    }
  }
  EXPECT_NE(messages.find("float32"), std::string::npos) << messages;
  EXPECT_NE(messages.find("bfloat16"), std::string::npos) << messages;
}

TEST(DdpReduceDtype, BadReduceDtypeSaysWhatWasExpected) {
  run_ranks(1, [&](ProcessGroup& group) {
    EXPECT_THROW_MSG(nn::DistributedDataParallel(make_mlp(kFloat32), {.process_group = handle(group),
                                                                      .reduce_dtype = kInt32}),
                     "reduce_dtype int32: expected a floating dtype");
  });
}

}  // namespace
}  // namespace tg::distributed
