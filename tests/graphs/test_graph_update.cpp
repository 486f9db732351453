// Recorded CUDA graphs updated in place instead of recorded again when their static inputs move: a
// static input replaced by another tensor, a model moved off the GPU and back (its parameters get
// new storage), and a static-buffer DataLoader made anew each epoch. Results equal eager runs.
#include <gtest/gtest.h>

#include <memory>

#include "data/dataloader.h"
#include "graphs/compile.h"
#include "graphs/cudagraphs/memory_range.h"
#include "nn/nn.h"
#include "optim/optim.h"
#include "support/test_support.h"
#include "tensor/cuda_runtime.h"

namespace tg {
namespace {

using testing::expect_close;

const CompileOptions kCudagraphs{.backend = "cudagraphs"};

TEST(AddressMove, MovesAddressesInsideTheRangeOnly) {
  const std::vector<graphs::AddressMove> moves{{{0x1000, 0x1100}, 0x9000}, {{0x2000, 0x2010}, 0x1000}};
  EXPECT_EQ(graphs::moved_address(0x1000, moves), 0x9000u);
  EXPECT_EQ(graphs::moved_address(0x10ff, moves), 0x90ffu);
  EXPECT_EQ(graphs::moved_address(0x1100, moves), 0x1100u);  // one past the end stays
  EXPECT_EQ(graphs::moved_address(0x0fff, moves), 0x0fffu);
  // Each address moves once, by its original place: two blocks may swap.
  EXPECT_EQ(graphs::moved_address(0x2008, moves), 0x1008u);
}

TEST(GraphUpdate, AStaticInputReplacedByAnotherTensorUpdatesTheGraph) {
  TG_REQUIRE_CUDA();
  const Device dev = cuda_device();
  auto f = compile([](const Tensor& x, const Tensor& w) { return relu(matmul(x, w)) + w.sum(); }, kCudagraphs);
  const Tensor x = randn({8, 16}, {.device = dev});
  Tensor w1 = randn({16, 4}, {.device = dev}), w2 = randn({16, 4}, {.device = dev});
  mark_static_address(w1);
  mark_static_address(w2);
  NoGradGuard no_grad;
  for (int i = 0; i < 3; ++i) expect_close(f(x, w1), relu(matmul(x, w1)) + w1.sum(), 1e-5, 1e-5);
  const int recorded = f.counters().graphs_captured;
  EXPECT_EQ(recorded, 1);
  for (int i = 0; i < 4; ++i) {
    const Tensor& w = i % 2 == 0 ? w2 : w1;
    expect_close(f(x, w), relu(matmul(x, w)) + w.sum(), 1e-5, 1e-5);
  }
  EXPECT_EQ(f.counters().graphs_captured, recorded);
  EXPECT_EQ(f.counters().rerecords, 0);
  EXPECT_EQ(f.counters().graph_updates, 4);
}

// A small MLP, the same initial weights for every call.
std::shared_ptr<nn::Sequential> mlp(const Device& dev) {
  manual_seed(3);
  auto m = std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Linear>(12, 32), std::make_shared<nn::ReLU>(), std::make_shared<nn::Linear>(32, 5)});
  m->to(dev);
  return m;
}

TEST(GraphUpdate, AModelMovedOffTheGpuAndBackReplaysItsGraphsUpdated) {
  TG_REQUIRE_CUDA();
  const Device dev = cuda_device();
  auto eager_model = mlp(dev), model = mlp(dev);
  optim::Adam eager_opt(eager_model->parameters(), {.lr = 1e-2}), opt(model->parameters(), {.lr = 1e-2});
  opt.set_capturable(true);
  auto loss = compile([model](const Tensor& x, const Tensor& y) { return cross_entropy((*model)(x), y); },
                      kCudagraphs);
  optim::CompiledStep step(opt, kCudagraphs);
  const Tensor x = randn({16, 12}, {.device = dev});
  const Tensor y = randint(0, 5, {16}, {.dtype = kInt64, .device = dev});
  int recorded = 0;
  for (int i = 0; i < 30; ++i) {
    if (i > 0 && i % 10 == 0) {  // the parameters get new storage, twice
      model->to(kCPU);
      model->to(dev);
    }
    eager_opt.zero_grad();
    cross_entropy((*eager_model)(x), y).backward();
    eager_opt.step();
    opt.zero_grad();
    loss(x, y).backward();
    step.step();
    if (i == 9) recorded = loss.counters().graphs_captured + step.counters().graphs_captured;
  }
  EXPECT_GT(recorded, 0);
  EXPECT_EQ(loss.counters().graphs_captured + step.counters().graphs_captured, recorded);
  EXPECT_EQ(loss.counters().rerecords + step.counters().rerecords, 0);
  EXPECT_GT(loss.counters().graph_updates + step.counters().graph_updates, 0);
  const TensorList a = eager_model->parameters(), b = model->parameters();
  for (size_t k = 0; k < a.size(); ++k) expect_close(b[k].detach(), a[k].detach(), 1e-4, 1e-5);
}

TEST(GraphUpdate, ANewStaticBufferLoaderEachEpochUpdatesTheGraphs) {
  TG_REQUIRE_CUDA();
  const Device dev = cuda_device();
  manual_seed(5);
  const data::TensorDataset dataset({randn({64, 12}), randint(0, 5, {64}, {.dtype = kInt64})});
  auto eager_model = mlp(dev), model = mlp(dev);
  optim::SGD eager_opt(eager_model->parameters(), {.lr = 0.1}), opt(model->parameters(), {.lr = 0.1});
  opt.set_capturable(true);
  auto loss = compile([model](const Tensor& x, const Tensor& y) { return cross_entropy((*model)(x), y); },
                      kCudagraphs);
  optim::CompiledStep step(opt, kCudagraphs);
  for (int epoch = 0; epoch < 4; ++epoch) {
    data::DataLoader loader(dataset, {.batch_size = 16, .shuffle = true, .seed = 1, .drop_last = true,
                                      .device = dev, .static_buffers = true});
    loader.start_epoch(epoch);
    while (auto batch = loader.next()) {
      eager_opt.zero_grad();
      cross_entropy((*eager_model)((*batch)[0]), (*batch)[1]).backward();
      eager_opt.step();
      opt.zero_grad();
      loss((*batch)[0], (*batch)[1]).backward();
      step.step();
    }
  }
  EXPECT_EQ(loss.counters().rerecords, 0);
  EXPECT_GT(loss.counters().graph_updates, 0);
  const TensorList a = eager_model->parameters(), b = model->parameters();
  for (size_t k = 0; k < a.size(); ++k) expect_close(b[k].detach(), a[k].detach(), 1e-4, 1e-5);
}

}  // namespace
}  // namespace tg
