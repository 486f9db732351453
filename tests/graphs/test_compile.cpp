// compile() on the CPU: tracing on fake tensors, lifting, folding, functionalization, guards,
// recompiles, fallbacks, partitioners, counters and the graph printers.
#include <gtest/gtest.h>

#include <algorithm>

#include "autograd/op_node.h"
#include "graphs/compile.h"
#include "graphs/runtime/compiled_backward.h"
#include "graphs/runtime/interpreter.h"
#include "graphs/testing/parity.h"
#include "support/test_support.h"
#include "tensor/tensor_impl.h"

namespace tg {
namespace {

using graphs::Phase;
using testing::random_tensor;

CompileOptions aot(std::string partitioner = "default") {
  return CompileOptions{.backend = "aot_eager", .partitioner = std::move(partitioner)};
}

bool has_op(const std::map<std::string, int>& counts, const std::string& name) { return counts.count(name) > 0; }

TEST(Compile, MatchesEagerValuesAndGrads) {
  auto fn = [](const TensorList& xs) { return TensorList{((xs[0] + xs[1]) * xs[1]).tanh().sum()}; };
  testing::expect_compiled_matches_eager(fn, {random_tensor({3, 4}, kFloat32, true), random_tensor({3, 4}, kFloat32, true)},
                                         {.compile = aot(), .calls = 3});
}

TEST(Compile, TracingRunsNoKernelsAndRecordsEveryOp) {
  Tensor x = random_tensor({2, 3}, kFloat32, true);
  auto f = compile([](const Tensor& a) { return (a.exp() * 2).sum(); }, aot());
  Tensor out = f(x);
  const graphs::JointGraph* joint = f.last_joint();
  ASSERT_NE(joint, nullptr);
  auto counts = joint->graph.op_counts();
  EXPECT_TRUE(has_op(counts, "exp"));
  EXPECT_TRUE(has_op(counts, "sum"));
  EXPECT_NEAR(out.item<float>(), (x.detach().exp() * 2).sum().item<float>(), 1e-4);
  bool saw_backward = false;
  for (const auto& n : joint->graph.nodes) saw_backward |= n.phase == Phase::Backward;
  EXPECT_TRUE(saw_backward);
}

TEST(Compile, CapturedParametersAreLiftedByIdentity) {
  Tensor w = random_tensor({4, 3}, kFloat32, true);
  auto fn = [w](const TensorList& xs) { return TensorList{xs[0].mm(w).relu().sum()}; };
  graphs::CompiledFunction compiled(fn, aot());
  Tensor x = random_tensor({2, 4}, kFloat32);
  Tensor out = compiled.call({x})[0];
  int lifted_inputs = 0;
  for (const auto& in : compiled.last_joint()->graph.inputs) lifted_inputs += in.kind == graphs::InputKind::Lifted;
  EXPECT_EQ(lifted_inputs, 1);
  // Held weakly once compiled: the caller's tensor is the only owner.
  EXPECT_TRUE(compiled.last_joint()->lifted.empty());
  out.backward();
  Tensor expected_grad;
  {
    Tensor w2 = w.detach().clone().requires_grad_(true);
    x.mm(w2).relu().sum().backward();
    expected_grad = w2.grad();
  }
  testing::expect_close(w.grad(), expected_grad, 1e-5, 1e-6);
}

TEST(Compile, CpuConstantsAreFolded) {
  auto fn = [](const TensorList& xs) {
    Tensor c = tensor<float>({1.0f});
    c.add_(2);
    return TensorList{xs[0] * 0 + c};
  };
  graphs::CompiledFunction compiled(fn, aot());
  Tensor out = compiled.call({random_tensor({3}, kFloat32)})[0];
  EXPECT_EQ(out.to_vector<float>(), std::vector<float>({3, 3, 3}));
  const graphs::Partition* p = compiled.last_partition();
  EXPECT_FALSE(has_op(p->forward.op_counts(), "add_"));
  EXPECT_FALSE(p->forward.constants.empty());
}

TEST(Compile, DataDependentReadFallsBackToEagerWithReason) {
  auto fn = [](const Tensor& x) { return x.sum().item<float>() > 0 ? x * 2 : x * 3; };
  auto f = compile(fn, aot());
  Tensor x = random_tensor({4}, kFloat32);
  testing::expect_close(f(x), fn(x));
  EXPECT_EQ(f.counters().eager_fallbacks, 1);
  ASSERT_EQ(f.counters().fallback_reasons.size(), 1u);
  EXPECT_NE(f.counters().fallback_reasons[0].find("data-dependent"), std::string::npos);
  testing::expect_close(f(x), fn(x));  // the fallback entry is cached: no second trace
  EXPECT_EQ(f.counters().eager_fallbacks, 1);
}

TEST(Compile, FullgraphRaisesOnDataDependentRead) {
  auto f = compile([](const Tensor& x) { return x * x.sum().item<float>(); },
                   CompileOptions{.backend = "aot_eager", .fullgraph = true});
  EXPECT_THROW_MSG(f(random_tensor({3}, kFloat32)), "Cannot access data pointer");
}

TEST(Compile, InPlaceOpsAreFunctionalizedWithEpilogueCopy) {
  auto fn = [](const TensorList& xs) {
    Tensor a = xs[0];
    a.mul_(2);
    return TensorList{a + xs[1]};
  };
  graphs::CompiledFunction compiled(fn, aot());
  Tensor a = random_tensor({5}, kFloat32), b = random_tensor({5}, kFloat32);
  Tensor a_before = a.clone();
  Tensor out = compiled.call({a, b})[0];
  testing::expect_close(a, a_before * 2);
  testing::expect_close(out, a_before * 2 + b);
  for (const auto& n : compiled.last_partition()->forward.nodes) EXPECT_FALSE(n.op->has(kInPlace)) << n.op->name();
  testing::expect_compiled_matches_eager(fn, {random_tensor({5}, kFloat32), random_tensor({5}, kFloat32)}, {.compile = aot()});
}

TEST(Compile, MutationThroughSliceOfIntermediateAndInput) {
  auto fn = [](const TensorList& xs) {
    Tensor y = xs[0] * 1;
    y.slice(0, 1, 3).add_(xs[1]);
    xs[0].narrow(0, 0, 2).zero_();
    return TensorList{y, y.slice(0, 0, 2)};
  };
  testing::expect_compiled_matches_eager(fn, {random_tensor({4, 3}, kFloat32), random_tensor({2, 3}, kFloat32)},
                                         {.compile = aot()});
}

TEST(Compile, RecompilesOnRequiresGradWithReason) {
  auto f = compile([](const Tensor& a, const Tensor& b) { return a + b; },
                   CompileOptions{.backend = "aot_eager", .input_names = {"a", "b"}});
  Tensor a = random_tensor({2}, kFloat32, true), b = random_tensor({2}, kFloat32, true);
  f(a, b);
  f(a, random_tensor({2}, kFloat32, false));
  EXPECT_EQ(f.counters().compilations, 2);
  ASSERT_EQ(f.counters().recompile_reasons.size(), 1u);
  EXPECT_EQ(f.counters().recompile_reasons[0], "input 'b' requires_grad mismatch: expected true, got false");
}

TEST(Compile, RecompilesOnShapeChange) {
  auto f = compile([](const Tensor& a) { return a * 2; }, aot());
  f(random_tensor({2}, kFloat32));
  f(random_tensor({3}, kFloat32));
  EXPECT_EQ(f.counters().compilations, 2);
  EXPECT_EQ(f.counters().recompile_reasons.at(0), "input 0 size mismatch: expected [2], got [3]");
}

TEST(Compile, CacheLimitFallsBackToEager) {
  auto f = compile([](const Tensor& a) { return a * 2; }, CompileOptions{.backend = "aot_eager", .cache_limit = 2});
  for (int n = 1; n <= 4; ++n) {
    Tensor x = random_tensor({n}, kFloat32);
    testing::expect_close(f(x), x * 2);
  }
  EXPECT_EQ(f.counters().compilations, 2);
  EXPECT_EQ(f.counters().eager_fallbacks, 2);
}

TEST(Compile, GradModeChangedInsidePersists) {
  auto f = compile(
      [](const Tensor& x) {
        Tensor y = x * x;
        set_grad_enabled(false);
        return std::tuple<Tensor, Tensor>{y.clone(), y};
      },
      aot());
  set_grad_enabled(true);
  Tensor x = random_tensor({3}, kFloat32, true);
  auto [a, b] = f(x);
  EXPECT_FALSE(is_grad_enabled());
  set_grad_enabled(true);
  EXPECT_EQ(a.grad_fn(), nullptr);
  EXPECT_NE(b.grad_fn(), nullptr);
}

TEST(Compile, BackwardNodesCarryForwardSequenceNumbers) {
  Tensor w = random_tensor({8, 4}, kFloat32, true);
  auto f = compile([w](const Tensor& x) { return (x.mm(w).tanh() - 1).abs().mean(); }, aot());
  f(random_tensor({2, 8}, kFloat32));
  const graphs::Graph& g = f.last_joint()->graph;
  std::set<int64_t> forward_seq, backward_seq;
  for (const auto& n : g.nodes) (n.phase == Phase::Forward ? forward_seq : backward_seq).insert(n.sequence_nr);
  forward_seq.erase(-1);
  backward_seq.erase(-1);
  EXPECT_FALSE(backward_seq.empty());
  for (int64_t s : backward_seq) EXPECT_TRUE(forward_seq.count(s)) << "backward seq " << s << " has no forward op";
  // mm, tanh, abs and mean each emit backward ops (sub by a scalar passes its gradient through).
  EXPECT_EQ(backward_seq.size(), 4u);
}

TEST(Compile, MinCutSavesFewerBytesThanDefaultWithEqualGrads) {
  // x @ w1, an elementwise chain, @ w2: min-cut recomputes the chain instead of saving it.
  Tensor w1 = random_tensor({64, 128}, kFloat32, true), w2 = random_tensor({128, 32}, kFloat32, true);
  auto model = [w1, w2](const TensorList& xs) {
    Tensor h = xs[0].mm(w1);
    h = h.gelu().tanh().sigmoid() * h;
    Tensor o = h.mm(w2).relu();
    return TensorList{(o * o).sum()};
  };
  graphs::CompiledFunction by_default(model, aot("default"));
  graphs::CompiledFunction by_min_cut(model, aot("min_cut"));
  Tensor x = random_tensor({16, 64}, kFloat32);
  by_default.call({x})[0].backward();
  Tensor g1 = w1.grad().clone(), g2 = w2.grad().clone();
  w1.grad().zero_();
  w2.grad().zero_();
  by_min_cut.call({x})[0].backward();
  testing::expect_close(w1.grad(), g1, 1e-4, 1e-5);
  testing::expect_close(w2.grad(), g2, 1e-4, 1e-5);
  EXPECT_LT(by_min_cut.counters().saved_bytes, by_default.counters().saved_bytes);
  EXPECT_GT(by_min_cut.counters().recomputed_nodes, 0);
}

TEST(Compile, UnknownBackendAndPartitionerAreRejected) {
  auto fn = [](const TensorList& xs) { return xs; };
  EXPECT_THROW_MSG(graphs::CompiledFunction(fn, CompileOptions{.backend = "tvm"}), "unknown backend 'tvm'");
  EXPECT_THROW_MSG(graphs::CompiledFunction(fn, CompileOptions{.partitioner = "greedy"}), "unknown partitioner 'greedy'");
}

TEST(GraphPrinting, TextAndDotShowBothHalves) {
  auto f = compile([](const Tensor& x, const Tensor& y) { return ((x + y) * y).sum(); }, aot());
  f(random_tensor({3}, kFloat32, true), random_tensor({3}, kFloat32));
  const graphs::Graph& g = f.last_joint()->graph;
  const std::string text = g.to_text();
  EXPECT_NE(text.find("= add(%arg0, %arg1)"), std::string::npos) << text;
  EXPECT_NE(text.find("backward of seq"), std::string::npos) << text;
  const std::string dot = g.to_dot("basic");
  EXPECT_NE(dot.find("digraph"), std::string::npos);
  EXPECT_NE(dot.find("#cfe2ff"), std::string::npos);  // forward colour
  EXPECT_NE(dot.find("#ffd8b1"), std::string::npos);  // backward colour
}

// The gradient of an input that requires grad but that no output depends on is no value of the
// joint graph: both printers show it as None without reading past the values (TG_LOGS=graphs
// crashed on such a graph).
TEST(GraphPrinting, AbsentGradientsPrintAsNone) {
  auto f = compile([](const Tensor& x, const Tensor& unused) { return (x * 2.0).sum(); }, aot());
  f(random_tensor({4}, kFloat32, true), random_tensor({2}, kFloat32, true));
  const graphs::Graph& g = f.last_joint()->graph;
  const std::string text = g.to_text();
  EXPECT_NE(text.find(", None)\n"), std::string::npos) << text;
  const std::string dot = g.to_dot("unused");
  EXPECT_NE(dot.find("output 2 (None)"), std::string::npos) << dot;
  EXPECT_EQ(dot.find("v-1"), std::string::npos) << dot;
}

TEST(Interpreter, RunsGraphWithoutTape) {
  auto f = compile([](const Tensor& x) { return x.exp().sum(); }, aot());
  Tensor x = random_tensor({4}, kFloat32, true);
  f(x);
  graphs::Interpreter interp(f.last_partition()->forward);
  TensorList out = interp.run({x});
  EXPECT_FALSE(out[0].requires_grad());
  EXPECT_NEAR(out[0].item<float>(), x.detach().exp().sum().item<float>(), 1e-5);
}

Tensor vec(std::vector<double> v) { return from_vector(v, {static_cast<int64_t>(v.size())}); }

// A compiled backward hands its saved values to the backward graph when the graph is not kept, so
// they can be freed as it runs (as eager autograd frees each node's); retain_graph keeps them.
TEST(CompiledBackwardNode, HandsItsSavedValuesOverUnlessTheGraphIsKept) {
  for (bool retain : {false, true}) {
    Tensor x = vec({1.0, 2.0}).requires_grad_();
    std::weak_ptr<TensorImpl> saved_seen;
    bool gone_during_run = false;
    auto runner = [&](TensorList saved, const TensorList& tangents) {
      saved_seen = saved[0].impl_ptr();
      saved.clear();
      gone_during_run = saved_seen.expired();
      return TensorList{tangents[0] * 2.0};
    };
    auto node = std::make_shared<graphs::CompiledBackward>(runner, TensorList{vec({3.0, 4.0})},
                                                           std::vector<TensorMeta>{meta_of(x)});
    node->mutable_next_edges().push_back(gradient_edge(x));
    Tensor out = x.detach().clone();
    out.impl()->autograd().grad_fn = node;
    out.impl()->autograd().output_nr = 0;
    out.backward(vec({1.0, 1.0}), retain);
    EXPECT_EQ(gone_during_run, !retain) << "retain_graph=" << retain;
    testing::expect_close(x.grad(), vec({2.0, 2.0}));
    if (retain) {
      out.backward(vec({1.0, 1.0}));  // the saved values are still there
      testing::expect_close(x.grad(), vec({4.0, 4.0}));
    } else {
      EXPECT_THROW_MSG(out.backward(vec({1.0, 1.0})), "backward through the graph a second time");
    }
  }
}

// Inputs over one piece of memory with different dtypes have no common view to regenerate them
// from: a clear error instead of a wrong graph.
TEST(Compile, InputsAliasingWithDifferentDtypesAreRefused) {
  Tensor block = zeros({8}, {.dtype = kInt64});
  Tensor as_float(std::make_shared<TensorImpl>(block.impl()->storage(), Shape{4}, Shape{1}, 0, kFloat32));
  auto f = compile([](const Tensor& a, const Tensor& b) { return a + b.to(kFloat32); }, aot());
  EXPECT_THROW_MSG(f(as_float, block.narrow(0, 4, 4)), "two inputs share memory with different dtypes (float32 and int64)");
}

// loss.backward() starts a compiled backward from the function's own fixed 1 (read in place by its
// graphs); that 1 never reaches the caller: gradients passed straight through it, and grad() asked
// for the root itself, are tensors of their own, so writing into them changes no later backward.
TEST(CompiledBackwardNode, ImplicitUnitGradientStaysPrivate) {
  // The gradient of x + 1 is the tangent itself: a hook on x keeps each one it sees.
  auto add_one = compile([](const Tensor& x) { return x + 1.0; }, aot());
  Tensor s = from_vector(std::vector<double>{2.0}, {}).requires_grad_();
  TensorList kept;
  s.register_hook([&kept](const Tensor& g) {
    kept.push_back(g);
    return Tensor();
  });
  for (int step = 0; step < 3; ++step) add_one(s).backward();
  ASSERT_EQ(kept.size(), 3u);
  kept[0].mul_(7.0);
  testing::expect_close(kept[1], from_vector(std::vector<double>{1.0}, {}));
  testing::expect_close(kept[2], from_vector(std::vector<double>{1.0}, {}));

  auto f = compile([](const Tensor& x) { return x.sum(); }, aot());
  Tensor x = vec({1.0, 2.0, 3.0}).requires_grad_();
  Tensor loss = f(x);
  Tensor first = grad({loss}, {loss}, {}, /*retain_graph=*/true)[0];
  Tensor second = grad({loss}, {loss}, {}, /*retain_graph=*/true)[0];
  first.fill_(5.0);
  testing::expect_close(second, from_vector(std::vector<double>{1.0}, {}));
  loss.backward();
  testing::expect_close(x.grad(), vec({1.0, 1.0, 1.0}));
}

}  // namespace
}  // namespace tg
