// tg::checkpoint (torch.utils.checkpoint.checkpoint with use_reentrant=False): the same gradients as
// without it (explicit inputs and captured parameters), activations dropped after the forward and
// rebuilt once in the backward, dropout masks and autocast replayed, nesting, lists, non-tensor and
// non-differentiable inputs, no_grad, and compiled functions whose backward graph recomputes the
// region instead of saving it.
#include <gtest/gtest.h>

#include <memory>

#include "support/test_support.h"
#include "tapegraph.h"
#include "tensor/cuda_runtime.h"
#include "tensor/memory/cuda_memory.h"

namespace tg {
namespace {

using testing::expect_close;
using testing::random_tensor;

// A float64 two-layer MLP whose weights the block captures (as a module's forward does).
struct Mlp {
  Tensor w1 = random_tensor({4, 6}, kFloat64, true), b1 = random_tensor({6}, kFloat64, true);
  Tensor w2 = random_tensor({6, 3}, kFloat64, true);
  int calls = 0;
  Tensor forward(const Tensor& x) {
    ++calls;
    const Tensor h = tanh(matmul(x, w1) + b1);
    return gelu(matmul(h * h.sigmoid(), w2), "tanh");
  }
  TensorList params() const { return {w1, w2, b1}; }
};

// Gradients of `loss` w.r.t. `wrt`, as fresh copies, through backward() (what training does).
TensorList grads_of(const Tensor& loss, const TensorList& wrt) {
  for (const Tensor& t : wrt) t.impl()->autograd().grad.reset();
  loss.backward();
  TensorList out;
  for (const Tensor& t : wrt) out.push_back(t.grad().clone());
  return out;
}

void expect_all_close(const TensorList& a, const TensorList& b, double rtol = 1e-12, double atol = 1e-14) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    SCOPED_TRACE("gradient " + std::to_string(i));
    expect_close(a[i], b[i], rtol, atol);
  }
}

TEST(Checkpoint, GradientsOfInputsAndCapturedParametersMatch) {
  manual_seed(0);
  Mlp mlp;
  const Tensor x = random_tensor({5, 4}, kFloat64, true);
  TensorList wrt = mlp.params();
  wrt.push_back(x);
  const TensorList plain = grads_of((mlp.forward(x * 2.0) * 3.0).sum(), wrt);
  const Tensor y = checkpoint([&](const Tensor& a) { return mlp.forward(a); }, x * 2.0);
  EXPECT_EQ(mlp.calls, 2);
  const TensorList ckpt = grads_of((y * 3.0).sum(), wrt);
  EXPECT_EQ(mlp.calls, 3) << "the backward recomputes the block exactly once";
  expect_all_close(ckpt, plain);
}

TEST(Checkpoint, GradcheckThroughTheRegion) {
  manual_seed(1);
  Mlp mlp;
  testing::expect_gradcheck(
      [&](const TensorList& t) { return checkpoint([&](const Tensor& a) { return mlp.forward(a); }, t[0] * t[1]); },
      {random_tensor({3, 4}, kFloat64, true), random_tensor({3, 4}, kFloat64, true), mlp.w1, mlp.b1, mlp.w2});
}

TEST(Checkpoint, GradMatchesBackward) {
  manual_seed(2);
  Mlp mlp;
  const Tensor x = random_tensor({5, 4}, kFloat64, true);
  const TensorList wrt{x, mlp.w1, mlp.w2};
  const TensorList plain = grad({mlp.forward(x).sum()}, wrt);
  const TensorList ckpt = grad({checkpoint([&](const Tensor& a) { return mlp.forward(a); }, x).sum()}, wrt);
  expect_all_close(ckpt, plain);
  EXPECT_FALSE(mlp.w1.grad().defined()) << "grad() must not accumulate into .grad";
}

// What the forward keeps: an activation made inside the region is freed as soon as the forward
// returns (without checkpoint the tanh node keeps it), and comes back only in the backward.
TEST(Checkpoint, TheForwardKeepsNoActivation) {
  manual_seed(3);
  const Tensor w = random_tensor({4, 4}, kFloat64, true), x = random_tensor({2, 4}, kFloat64, true);
  std::weak_ptr<StorageImpl> activation;
  auto block = [&](const Tensor& a) {
    const Tensor h = tanh(matmul(a, w));  // tanh saves its output, mul saves both operands
    activation = h.impl()->storage();
    return h * h;
  };
  Tensor plain = block(x);
  EXPECT_FALSE(activation.expired()) << "without checkpoint the tape keeps the activation";
  const TensorList expected = grads_of(plain.sum(), {x, w});
  plain = Tensor();

  Tensor y = checkpoint(block, x);
  EXPECT_TRUE(activation.expired()) << "the checkpointed forward kept an activation";
  const TensorList got = grads_of(y.sum(), {x, w});
  expect_all_close(got, expected);
}

TEST(Checkpoint, DropoutMasksAreReplayed) {
  manual_seed(4);
  Mlp mlp;
  const Tensor x = random_tensor({64, 4}, kFloat64, true);
  auto block = [&](const Tensor& a) { return dropout(mlp.forward(dropout(a, 0.5, true)), 0.3, true); };
  const TensorList wrt{x, mlp.w1, mlp.b1, mlp.w2};
  manual_seed(11);
  const Tensor plain_out = block(x);
  const Tensor after_plain = rand({3});  // the generator moved on
  const TensorList plain = grads_of(plain_out.sum(), wrt);
  const Tensor next_plain = rand({3});

  manual_seed(11);
  const Tensor y = checkpoint(block, x);
  const Tensor after_ckpt = rand({3});  // draws between the forward and the backward do not matter
  const TensorList ckpt = grads_of(y.sum(), wrt);
  const Tensor next_ckpt = rand({3});
  expect_close(y, plain_out, 0, 0);
  expect_all_close(ckpt, plain);
  expect_close(after_ckpt, after_plain, 0, 0);
  expect_close(next_ckpt, next_plain, 0, 0);  // the recomputation left the generator where it was
}

TEST(Checkpoint, AutocastIsReplayed) {
  manual_seed(5);
  const Tensor w = random_tensor({8, 8}, kFloat32, true), x = random_tensor({4, 8}, kFloat32, true);
  auto block = [&](const Tensor& a) { return relu(matmul(a, w)) * a.sum(); };
  auto run = [&](bool ckpt) {
    Tensor y;
    {
      AutocastGuard autocast(kCPU, kBFloat16);
      y = ckpt ? checkpoint(block, x) : block(x);
    }
    EXPECT_EQ(y.dtype(), kBFloat16);  // the product's dtype (a 0-dim float32 factor does not promote)
    return grads_of(y.sum(), {x, w});  // backward outside the guard: the recomputation must re-enter it
  };
  const TensorList plain = run(false);
  const TensorList ckpt = run(true);
  expect_all_close(ckpt, plain, 0, 0);
}

TEST(Checkpoint, NestedCheckpoints) {
  manual_seed(6);
  Mlp inner, outer;
  const Tensor up = random_tensor({3, 4});  // back to the blocks' width
  const Tensor x = random_tensor({5, 4}, kFloat64, true);
  auto block = [&](const Tensor& a) {
    const Tensor h = inner.forward(a);
    return outer.forward(matmul(checkpoint([&](const Tensor& b) { return inner.forward(b); }, matmul(h, up)), up));
  };
  TensorList wrt{x, inner.w1, inner.w2, outer.w1, outer.b1};
  auto plain_block = [&](const Tensor& a) {
    const Tensor h = inner.forward(a);
    return outer.forward(matmul(inner.forward(matmul(h, up)), up));
  };
  const TensorList plain = grads_of(plain_block(x).pow(2).sum(), wrt);
  inner.calls = outer.calls = 0;
  const Tensor y = checkpoint(block, x);
  const TensorList ckpt = grads_of(y.pow(2).sum(), wrt);
  expect_all_close(ckpt, plain);
  // The outer block runs twice; inner.forward twice per run of the block (directly and inside the
  // nested checkpoint) and once more when the nested region itself is recomputed.
  EXPECT_EQ(outer.calls, 2);
  EXPECT_EQ(inner.calls, 5);
}

TEST(Checkpoint, ListsNonTensorAndNonDifferentiableArguments) {
  manual_seed(7);
  const Tensor table = random_tensor({10, 4}, kFloat64, true), scale = random_tensor({4}, kFloat64, false);
  const Tensor ids = randint(0, 10, {6});
  auto block = [](const TensorList& ts, const Tensor& index, double k) {
    const Tensor e = embedding(ts[0], index);
    return TensorList{tanh(e * ts[1]) * k, e.sum(Shape{1})};
  };
  const TensorList plain_out = block({table, scale}, ids, 1.5);
  const TensorList plain = grads_of((plain_out[0].sum() + plain_out[1].pow(2).sum()), {table});
  const TensorList out = checkpoint(block, TensorList{table, scale}, ids, 1.5);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_FALSE(scale.requires_grad());
  const TensorList ckpt = grads_of(out[0].sum() + out[1].pow(2).sum(), {table});
  expect_all_close(ckpt, plain);
  // Only the second output used: the first gets no gradient, as without checkpoint.
  const TensorList only = checkpoint(block, TensorList{table, scale}, ids, 1.5);
  const TensorList g = grad({only[1].sum()}, {table});
  expect_close(g[0], grad({block({table, scale}, ids, 1.5)[1].sum()}, {table})[0], 0, 0);
}

// In-place ops and views inside the region: their rebased histories are recorded twice alike.
TEST(Checkpoint, InPlaceOpsAndViewsInsideTheRegion) {
  manual_seed(9);
  const Tensor w = random_tensor({4, 6}, kFloat64, true), x = random_tensor({3, 4}, kFloat64, true);
  auto block = [&](const Tensor& a) {
    Tensor h = matmul(a, w) + 1.0;
    h.narrow(1, 1, 3).mul_(2.0);  // a view written in place
    h.clamp_(std::nullopt, 1.5);
    return h.t().exp();
  };
  const TensorList plain = grads_of(block(x).pow(2).sum(), {x, w});
  const TensorList ckpt = grads_of(checkpoint(block, x).pow(2).sum(), {x, w});
  expect_all_close(ckpt, plain);
}

TEST(Checkpoint, UnderNoGradItIsTheFunction) {
  Mlp mlp;
  const Tensor x = random_tensor({2, 4}, kFloat64, true);
  NoGradGuard no_grad;
  const Tensor y = checkpoint([&](const Tensor& a) { return mlp.forward(a); }, x);
  EXPECT_EQ(mlp.calls, 1);
  EXPECT_FALSE(y.requires_grad());
  expect_close(y, mlp.forward(x), 0, 0);
}

TEST(Checkpoint, RetainGraphRecomputesOnce) {
  Mlp mlp;
  const Tensor x = random_tensor({2, 4}, kFloat64, true);
  const Tensor y = checkpoint([&](const Tensor& a) { return mlp.forward(a); }, x).sum();
  y.backward({}, /*retain_graph=*/true);
  const Tensor first = mlp.w1.grad().clone();
  y.backward();
  expect_close(mlp.w1.grad(), first * 2.0, 1e-12, 0);
  EXPECT_EQ(mlp.calls, 2);
  EXPECT_THROW_MSG(y.backward(), "backward through the graph a second time");
}

TEST(Checkpoint, InputWrittenInPlaceAfterTheForwardIsAnError) {
  Mlp mlp;
  Tensor x = random_tensor({2, 4}, kFloat64, true) * 1.0;
  const Tensor y = checkpoint([&](const Tensor& a) { return mlp.forward(a); }, x);
  { NoGradGuard no_grad; x.add_(1.0); }
  EXPECT_THROW_MSG(y.sum().backward(), "modified by an inplace operation");
}

TEST(Checkpoint, FunctionThatChangesBetweenRunsIsAnError) {
  const Tensor x = random_tensor({3}, kFloat64, true);
  int runs = 0;
  const Tensor y = checkpoint([&](const Tensor& a) { return ++runs == 1 ? (a * a).exp() : a * a; }, x);
  EXPECT_THROW_MSG(y.sum().backward(), "must run the same ops each time");
}

TEST(Checkpoint, DoubleBackwardIsRefused) {
  const Tensor x = random_tensor({3}, kFloat64, true);
  const Tensor y = checkpoint([](const Tensor& a) { return (a * a).exp(); }, x).sum();
  EXPECT_THROW_MSG(grad({y}, {x}, {}, {}, /*create_graph=*/true), "create_graph=true");
}

TEST(Checkpoint, CudaMatchesCpuAndDropsActivations) {
  TG_REQUIRE_CUDA();
  manual_seed(8);
  const Tensor w = random_tensor({256, 256}, kFloat32, false).to(cuda_device()).requires_grad_();
  const Tensor x = random_tensor({512, 256}, kFloat32, false).to(cuda_device()).requires_grad_();
  auto block = [&](const Tensor& a) {
    Tensor h = a;
    for (int i = 0; i < 4; ++i) h = dropout(tanh(matmul(h, w)), 0.2, true);
    return h;
  };
  auto run = [&](bool ckpt) {
    manual_seed(9);
    cuda::synchronize();
    const int64_t before = cuda::memory_allocated();
    const Tensor y = ckpt ? checkpoint(block, x) : block(x);
    cuda::synchronize();
    const int64_t held = cuda::memory_allocated() - before;
    TensorList g = grads_of((y * y).sum(), {x, w});
    g.push_back(y.detach());
    return std::make_pair(g, held);
  };
  const auto [plain, plain_held] = run(false);
  const auto [ckpt, ckpt_held] = run(true);
  expect_all_close(ckpt, plain, 1e-5, 1e-6);
  // The plain forward keeps four tanh outputs, four masks and four dropout outputs; the
  // checkpointed one keeps the output only.
  EXPECT_LE(ckpt_held, 512 * 256 * 4 + (1 << 20));
  EXPECT_GT(plain_held, 3 * ckpt_held);
}

// Forward-phase nodes of a compiled backward graph (what it recomputes) whose op name starts with
// `name` ("linear" counts the fused linear_relu too).
int recomputed_ops(const graphs::Partition& p, const std::string& name) {
  int n = 0;
  for (const graphs::GraphNode& node : p.backward.nodes)
    if (node.phase == graphs::Phase::Forward && std::string(node.op->name()).starts_with(name)) ++n;
  return n;
}

TEST(CheckpointCompiled, BackwardGraphRecomputesTheRegions) {
  for (const char* partitioner : {"default", "min_cut"}) {
    SCOPED_TRACE(partitioner);
    manual_seed(0);
    nn::Linear fc1(16, 32), fc2(32, 16);
    auto block = [&](const Tensor& a) { return fc2(gelu(fc1(a), "tanh")).tanh(); };
    auto plain_fn = [&](const Tensor& x) {
      const Tensor h = block(x);
      return (block(h) * h).sum();
    };
    auto ckpt_fn = [&](const Tensor& x) {
      const Tensor h = checkpoint(block, x);
      return (checkpoint(block, h) * h).sum();
    };
    const Tensor x = randn({8, 16}).requires_grad_();
    const TensorList wrt{x, fc1.weight(), fc1.bias(), fc2.weight()};
    const TensorList expected = grads_of(plain_fn(x), wrt);
    auto plain = compile(plain_fn, {.backend = "aot_eager", .partitioner = partitioner});
    auto ckpt = compile(ckpt_fn, {.backend = "aot_eager", .partitioner = partitioner});
    expect_all_close(grads_of(ckpt(x), wrt), expected, 1e-5, 1e-6);
    expect_all_close(grads_of(ckpt_fn(x), wrt), expected, 1e-5, 1e-6);  // eager checkpoint
    grads_of(plain(x), wrt);
    const graphs::Partition& p = *ckpt.last_partition();
    // Saved: the value between the blocks and the second block's output (both leave their regions);
    // the linear layers' activations are rebuilt in the backward, products included.
    EXPECT_LE(p.saved_bytes, 2 * 8 * 16 * 4);
    EXPECT_LT(p.saved_bytes, plain.last_partition()->saved_bytes);
    // default: fc1 of each block (gelu's backward reads its output; no backward reads fc2's).
    // min_cut: the whole function from x, which costs nothing to keep.
    EXPECT_EQ(recomputed_ops(p, "linear"), std::string(partitioner) == "default" ? 2 : 4);
    EXPECT_EQ(recomputed_ops(*plain.last_partition(), "linear"), 0);
    // The first region is recomputed after the second region's backward has begun, not up front.
    int first_backward = -1, last_recomputed = -1;
    for (size_t i = 0; i < p.backward.nodes.size(); ++i) {
      const bool fw = p.backward.nodes[i].phase == graphs::Phase::Forward;
      if (!fw && first_backward < 0) first_backward = static_cast<int>(i);
      if (fw) last_recomputed = static_cast<int>(i);
    }
    EXPECT_GT(last_recomputed, first_backward);
  }
}

TEST(CheckpointCompiled, DropoutDrawsTheEagerMasks) {
  manual_seed(1);
  nn::Linear fc(8, 8);
  auto block = [&](const Tensor& a) { return dropout(fc(a), 0.5, true).relu() * a; };
  const Tensor x = randn({32, 8}).requires_grad_();
  const TensorList wrt{x, fc.weight(), fc.bias()};
  manual_seed(2);
  const Tensor plain_loss = block(x).sum();
  const TensorList plain = grads_of(plain_loss, wrt);
  auto ckpt = compile([&](const Tensor& a) { return checkpoint(block, a).sum(); }, {.backend = "aot_eager"});
  manual_seed(2);
  const Tensor loss = ckpt(x);
  expect_close(loss, plain_loss, 1e-5, 1e-6);
  expect_all_close(grads_of(loss, wrt), plain, 1e-5, 1e-6);
  // The mask is drawn once, in the forward graph: the backward recomputes the rest from it.
  for (const graphs::GraphNode& n : ckpt.last_partition()->backward.nodes) EXPECT_FALSE(n.op->has(kRandom));
  EXPECT_EQ(recomputed_ops(*ckpt.last_partition(), "linear"), 1);
}

TEST(CheckpointCompiled, NestedRegionsAndListOutputs) {
  manual_seed(3);
  nn::Linear fc1(8, 8), fc2(8, 8);
  auto inner = [&](const Tensor& a) { return fc2(a).sigmoid(); };
  auto outer = [&](const Tensor& a, const Tensor& b) {
    const Tensor h = checkpoint(inner, fc1(a).relu()) * b;
    return TensorList{h.tanh(), h.sum(Shape{1})};
  };
  auto fn = [&](const Tensor& a, const Tensor& b) {
    const TensorList r = checkpoint(outer, a, b);
    return (r[0] * r[0]).sum() + r[1].sum();
  };
  const Tensor x = randn({4, 8}).requires_grad_(), b = randn({4, 8});
  const TensorList wrt{x, fc1.weight(), fc2.weight(), fc2.bias()};
  const TensorList expected = grads_of(fn(x, b), wrt);
  auto compiled = compile(fn, {.backend = "aot_eager"});
  expect_all_close(grads_of(compiled(x, b), wrt), expected, 1e-5, 1e-6);
  // Kept: the region's output r[0], which the product outside reads (as eager keeps it); x and b
  // are arguments. Recomputed: both layers (relu's and sigmoid's backward read their outputs).
  EXPECT_EQ(compiled.last_partition()->saved_bytes, 4 * 8 * 4);
  EXPECT_EQ(recomputed_ops(*compiled.last_partition(), "linear"), 2);
  EXPECT_EQ(recomputed_ops(*compiled.last_partition(), "sigmoid"), 1);
}

nn::GPTConfig tiny_gpt(double dropout, bool ckpt) {
  return {.vocab_size = 17, .context = 8, .d_model = 16, .heads = 2, .layers = 3, .dropout = dropout,
          .checkpoint = ckpt};
}

TEST(CheckpointGPT, SameLossAndGradientsAsWithout) {
  for (double p : {0.0, 0.1}) {
    SCOPED_TRACE(p);
    manual_seed(0);
    nn::GPT plain(tiny_gpt(p, false));
    manual_seed(0);
    nn::GPT ckpt(tiny_gpt(p, true));
    const Tensor idx = randint(0, 17, {4, 8}), targets = randint(0, 17, {4, 8});
    manual_seed(3);
    const TensorList expected = testing::loss_and_grads(plain, plain.loss(idx, targets));
    manual_seed(3);
    const TensorList got = testing::loss_and_grads(ckpt, ckpt.loss(idx, targets));
    expect_all_close(got, expected, 1e-6, 1e-7);
  }
}

TEST(CheckpointGPT, CompiledMatchesEager) {
  manual_seed(0);
  nn::GPT model(tiny_gpt(0.0, true));
  const Tensor idx = randint(0, 17, {2, 8}), targets = randint(0, 17, {2, 8});
  const TensorList expected = testing::loss_and_grads(model, model.loss(idx, targets));
  auto loss = compile([&](const Tensor& a, const Tensor& b) { return model.loss(a, b); }, {.backend = "aot_eager"});
  const TensorList got = testing::loss_and_grads(model, loss(idx, targets));
  expect_all_close(got, expected, 1e-5, 1e-6);
  // qkv, out (ln_2's backward reads the sum it feeds) and fc per block; no backward reads proj's output.
  EXPECT_EQ(recomputed_ops(*loss.last_partition(), "linear"), 3 * 3);
}

TEST(CheckpointGPT, CudaGraphsMatchEagerWithoutCheckpoint) {
  TG_REQUIRE_CUDA();
  manual_seed(0);
  nn::GPT plain(tiny_gpt(0.0, false));
  manual_seed(0);
  nn::GPT ckpt(tiny_gpt(0.0, true));
  plain.to(cuda_device());
  ckpt.to(cuda_device());
  const Tensor idx = randint(0, 17, {2, 8}).to(cuda_device()), targets = randint(0, 17, {2, 8}).to(cuda_device());
  const TensorList expected = testing::loss_and_grads(plain, plain.loss(idx, targets));
  auto loss = compile([&](const Tensor& a, const Tensor& b) { return ckpt.loss(a, b); }, {.backend = "cudagraphs"});
  for (int step = 0; step < 3; ++step) {  // trace, record, replay
    SCOPED_TRACE(step);
    expect_all_close(testing::loss_and_grads(ckpt, loss(idx, targets)), expected, 1e-4, 1e-5);
  }
  EXPECT_GT(loss.last_partition()->recomputed_nodes, 0);
}

}  // namespace
}  // namespace tg
