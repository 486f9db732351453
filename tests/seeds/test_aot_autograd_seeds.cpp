// C++ ports of PyTorch's test/dynamo/test_aot_autograd.py (the seed), backend aot_eager.
// Each TEST names the seed case it ports. test_LSTM and test_split_with_sizes_* are in
// test_sequence_seeds.cpp. Not ported here: the convolution cases (those modules do not exist
// yet), and cases that only exercise Python-side tooling. test_call_fn_with_non_const_inputs_aot_safe
// uses a Linear where the seed uses a Conv2d.
#include <gtest/gtest.h>

#include <cmath>

#include "autograd/function.h"
#include "graphs/compile.h"
#include "graphs/testing/parity.h"
#include "nn/nn.h"
#include "support/test_support.h"

namespace tg {
namespace {

using testing::expect_close;
using testing::random_tensor;

const CompileOptions kAot{.backend = "aot_eager"};

// Seed: test_mutation (and test_call_fn_with_non_const_inputs_aot_unsafe): a parameter mutated under no_grad.
TEST(AotAutogradSeed, test_mutation) {
  auto fn = [](const Tensor& param, const Tensor& y) {
    const bool prev = is_grad_enabled();
    set_grad_enabled(false);
    Tensor p = param;
    p.add_(y);
    set_grad_enabled(prev);
    return y;
  };
  Tensor y = randn({4});
  Tensor x = randn({4}).requires_grad_(true);
  Tensor expected = x.detach() + y;
  auto aot_fn = compile(fn, kAot);
  Tensor out = aot_fn(x, y);
  expect_close(out, y);
  expect_close(x.detach(), expected);  // the caller's parameter saw the write exactly once
  EXPECT_TRUE(x.is_leaf());
}

// Seed: test_mutation1: slice assignment of one input's slice into another input, then a view.
TEST(AotAutogradSeed, test_mutation1) {
  auto fn = [](const TensorList& xs) {
    Tensor stack0 = xs[0];
    Tensor getitem = xs[1].slice(2, {}, 256).slice(3, {}, 257);
    stack0.slice(1, {}, -1).slice(3, 256, {}).copy_(getitem);
    return TensorList{stack0.view({1, 12, 1024, 513})};
  };
  testing::expect_compiled_matches_eager(fn, {randn({12, 4, 256, 513}), randn({12, 3, 512, 513})}, {.compile = kAot});
}

// Seed: test_negative_testing_mutation: the same write into an intermediate (sin of the input).
TEST(AotAutogradSeed, test_negative_testing_mutation) {
  auto fn = [](const TensorList& xs) {
    Tensor stack0 = xs[0].sin();
    Tensor getitem = xs[1].slice(2, {}, 256).slice(3, {}, 257);
    stack0.slice(1, {}, -1).slice(3, 256, {}).copy_(getitem);
    return TensorList{stack0.view({1, 12, 1024, 513})};
  };
  testing::expect_compiled_matches_eager(fn, {randn({12, 4, 256, 513}), randn({12, 3, 512, 513})}, {.compile = kAot});
}

// Seed: test_negative_testing: sin(x).add_(y).
TEST(AotAutogradSeed, test_negative_testing) {
  auto fn = [](const TensorList& xs) { return TensorList{xs[0].sin().add_(xs[1])}; };
  testing::expect_compiled_matches_eager(fn, {randn({4}), randn({4})}, {.compile = kAot});
  testing::expect_compiled_matches_eager(fn, {randn({4}).requires_grad_(true), randn({4}).requires_grad_(true)},
                                         {.compile = kAot});
}

// Seed: test_call_fn_with_non_const_inputs_aot_unsafe_control_flow: a branch on a value.
TEST(AotAutogradSeed, test_call_fn_with_non_const_inputs_aot_unsafe_control_flow) {
  auto bad_fwd = [](const Tensor& param, const Tensor& y) { return y[0][0].item<float>() < 3 ? y + param : param * y; };
  auto fn = [bad_fwd](const Tensor& x, const Tensor& y) {
    Tensor a = x * y;
    a = bad_fwd(a, a);
    Tensor b = x + y;
    return a * b;
  };
  Tensor x = randn({2, 2}).requires_grad_(true);
  Tensor y = randn({2, 2});
  auto aot_fn = compile(fn, kAot);
  expect_close(aot_fn(x, y), fn(x, y));
  EXPECT_EQ(aot_fn.counters().eager_fallbacks, 1);
}

// Seed: test_requires_grad_fake_via_dynamo_recompiles.
TEST(AotAutogradSeed, test_requires_grad_fake_via_dynamo_recompiles) {
  auto fn = [](const TensorList& xs) { return TensorList{xs[0] + xs[1]}; };
  Tensor x = randn({3, 3}).requires_grad_(true), y = randn({3, 3}).requires_grad_(true), z = randn({3, 3});
  graphs::CompiledFunction fxy(fn, CompileOptions{.backend = "aot_eager", .input_names = {"x", "y"}});
  testing::expect_compiled_matches_eager(fn, {x, y}, {.compile = kAot});
  fxy.call({x, y});
  fxy.call({x, z});
  EXPECT_EQ(fxy.counters().compilations, 2);
  ASSERT_EQ(fxy.counters().recompile_reasons.size(), 1u);
  EXPECT_NE(fxy.counters().recompile_reasons[0].find("input 'y' requires_grad mismatch: expected true"),
            std::string::npos);
  graphs::CompiledFunction fxz(fn, kAot);
  fxz.call({x, z});
  fxz.call({x, z});
  EXPECT_EQ(fxz.counters().compilations, 1);
  EXPECT_TRUE(fxz.counters().recompile_reasons.empty());
}

// Seed: test_double_backward_errors (f1..f4, with and without an explicit grad_output).
TEST(AotAutogradSeed, test_double_backward_errors) {
  const std::string err = "torch.compile with aot_autograd does not currently support double backward";
  for (bool explicit_grad : {true, false}) {
    Tensor grad_output = explicit_grad ? scalar_tensor(1.0).requires_grad_(true) : Tensor();
    TensorList gos = explicit_grad ? TensorList{grad_output} : TensorList{};
    Tensor x = scalar_tensor(1.0).requires_grad_(true);

    auto f1 = [&](const Tensor& a) {
      Tensor y = a.sin().exp();
      Tensor gx = grad({y}, {a}, gos, {}, true)[0];
      grad({gx}, {a});
      return gx;
    };
    f1(x);
    auto c1 = compile(f1, kAot);
    EXPECT_THROW_MSG(c1(x), err);

    auto f2 = [&](const Tensor& a) {
      Tensor y = a.sin().exp();
      return grad({y}, {a}, gos, {}, true)[0];
    };
    auto c2 = compile(f2, kAot);
    Tensor gx2 = c2(x);
    EXPECT_THROW_MSG(grad({gx2}, {x}), err);

    auto c3 = compile([](const Tensor& a) { return a.sin().exp(); }, kAot);
    Tensor y3 = c3(x);
    Tensor gx3 = grad({y3}, {x}, gos, {}, true)[0];
    EXPECT_THROW_MSG(grad({gx3}, {x}), err);
  }
  auto c4 = compile([](const Tensor& a) { return a.sin().exp(); }, kAot);
  Tensor x = scalar_tensor(1.0).requires_grad_(true);
  Tensor y = c4(x);
  Tensor gx = grad({y}, {x})[0];
  EXPECT_NEAR(gx.item<double>(), std::cos(1.0) * std::exp(std::sin(1.0)), 1e-6);
}

// Seed: test_arg_dupe_via_dynamo_recompiles: f(x, x) specializes, f(x, y) recompiles with the reason.
TEST(AotAutogradSeed, test_arg_dupe_via_dynamo_recompiles) {
  auto fn = [](const TensorList& xs) {
    Tensor x = xs[0], y = xs[1];
    x = x.trunc_();
    y = y.trunc_();
    return TensorList{x + y};
  };
  Tensor x = randn({3, 3}).requires_grad_(true), y = randn({3, 3}).requires_grad_(true);
  Tensor x1 = x.clone(), x2 = x.clone(), x3 = x.clone(), x4 = x.clone();
  Tensor y1 = y.clone(), y2 = y.clone(), y4 = y.clone();
  const CompileOptions named{.backend = "aot_eager", .input_names = {"x", "y"}};
  graphs::CompiledFunction fxy(fn, named);
  fxy.call({x1, y1});
  fxy.call({x2, y2});
  EXPECT_TRUE(fxy.counters().recompile_reasons.empty());
  EXPECT_EQ(fxy.counters().compilations, 1);

  graphs::CompiledFunction fxx(fn, named);
  Tensor eager_x3 = x.clone();
  Tensor expected = fn({eager_x3, eager_x3})[0];
  Tensor got = fxx.call({x3, x3})[0];
  expect_close(got, expected);
  expect_close(x3, eager_x3);
  fxx.call({x4, y4});
  EXPECT_EQ(fxx.counters().compilations, 2);
  ASSERT_EQ(fxx.counters().recompile_reasons.size(), 1u);
  EXPECT_EQ(fxx.counters().recompile_reasons[0], "input 'y' is input 'x'");
}

// Seed: test_alias_inputs: aliased CPU constants with a data-dependent branch inside.
TEST(AotAutogradSeed, test_alias_inputs) {
  auto fn = []() {
    Tensor a = tensor<int64_t>({1});
    a = a.slice(0, 0, 1);
    Tensor b = a.squeeze();
    a[0].fill_(0);
    if (a[0].item<int64_t>() < 100000) {
    }
    a[0].fill_(2);
    return b;
  };
  Tensor ref = fn();
  auto aot_fn = compile(fn, kAot);
  Tensor actual = aot_fn();
  EXPECT_EQ(actual.item<int64_t>(), ref.item<int64_t>());
  EXPECT_EQ(actual.item<int64_t>(), 2);
}

// Seed: test_grad_inputs_alias_inputs: a custom Function returning one of its inputs.
struct ReturnsSecondInput : Function<ReturnsSecondInput> {
  static Tensor forward(AutogradContext* ctx, const Tensor& x, const Tensor& y) {
    ctx->save_for_backward({x});
    return y;
  }
  static TensorList backward(AutogradContext* ctx, const TensorList& grads) {
    return {ctx->get_saved_variables()[0], grads[0]};
  }
};

TEST(AotAutogradSeed, test_grad_inputs_alias_inputs) {
  auto fn = [](const TensorList& xs) { return TensorList{ReturnsSecondInput::apply(xs[0], xs[1])}; };
  testing::expect_compiled_matches_eager(fn, {ones({1}).requires_grad_(true), ones({1}).requires_grad_(true)},
                                         {.compile = kAot});
}

// Seed: test_nn_parameter_construction: a parameter constructed inside the function.
TEST(AotAutogradSeed, test_nn_parameter_construction) {
  auto fn = [](const Tensor& x) {
    Tensor y = x.sin();
    Tensor z = ones({1}).requires_grad_(true);
    return y + z;
  };
  Tensor x = rand({4, 4});
  auto opt_fn = compile(fn, kAot);
  expect_close(opt_fn(x), fn(x));
}

// Seed: test_eager_sequence_nr: ops of the backward carry the sequence number of their forward op,
// also for a gradient computed with create_graph inside the compiled function.
TEST(AotAutogradSeed, test_eager_sequence_nr) {
  Tensor w1 = randn({16, 32}).requires_grad_(true), b1 = randn({16}).requires_grad_(true);
  Tensor w2 = randn({1, 16 * 4}).requires_grad_(true);
  auto grad_with_create_graph = [&](const Tensor& x, const Tensor& target) {
    Tensor h = linear(x, w1, b1).relu();
    h = h + h;
    Tensor out = linear(h.flatten(), w2);
    Tensor loss = l1_loss(out, target);
    return grad({loss}, {x}, {}, {}, true)[0];
  };
  Tensor x = rand({4, 32}).requires_grad_(true);
  Tensor target = rand({1});
  auto compiled = compile(grad_with_create_graph, kAot);
  expect_close(compiled(x, target), grad_with_create_graph(x, target), 1e-5, 1e-6);
  // Every op that ran inside the create_graph backward carries the number of a forward op.
  const graphs::Graph& g = compiled.last_joint()->graph;
  std::map<int64_t, std::string> first_op;  // sequence number -> the op that created it
  std::set<int64_t> reused;
  for (const auto& n : g.nodes) {
    if (n.sequence_nr < 0) continue;
    if (!first_op.emplace(n.sequence_nr, std::string(n.op->name())).second) reused.insert(n.sequence_nr);
  }
  EXPECT_GE(reused.size(), 4u) << g.to_text();  // linear, relu, add, l1_loss each got backward ops
  for (int64_t s : reused) EXPECT_NE(first_op[s].find("backward"), 0u) << "seq " << s;
}

// Seed: test_aot_grad_mode_mutation: grad mode set inside the function persists after the call.
TEST(AotAutogradSeed, test_aot_grad_mode_mutation) {
  auto f = [](const Tensor& x) {
    Tensor y = x * x;
    set_grad_enabled(false);
    return std::tuple<Tensor, Tensor>{y.clone(), y};
  };
  auto f_compiled = compile(f, kAot);
  set_grad_enabled(true);
  Tensor x = ones({3}).requires_grad_(true) * 3;
  auto [r0, r1] = f(x);
  EXPECT_FALSE(is_grad_enabled());
  set_grad_enabled(true);
  auto [c0, c1] = f_compiled(x);
  EXPECT_FALSE(is_grad_enabled());
  set_grad_enabled(true);
  expect_close(c0, r0);
  expect_close(c1, r1);
  EXPECT_EQ(r0.grad_fn(), nullptr);
  EXPECT_EQ(c0.grad_fn(), nullptr);
  ASSERT_NE(r1.grad_fn(), nullptr);
  ASSERT_NE(c1.grad_fn(), nullptr);
  // As in the seed: the elementwise sum of everything each grad_fn returns.
  Tensor g = tensor<float>({-1.0f, 2.0f, 0.0f});
  auto total = [](const TensorList& grads) {
    Tensor acc;
    for (const Tensor& t : grads)
      if (t.defined()) acc = acc.defined() ? acc + t : t;
    return acc;
  };
  expect_close(total(c1.grad_fn()->apply({g})), total(r1.grad_fn()->apply({g})));
}

// Seed: test_aot_autograd_raises_invalid_leaf_set.
TEST(AotAutogradSeed, test_aot_autograd_raises_invalid_leaf_set) {
  auto f = compile(
      [](const Tensor& x) {
        Tensor t = x;
        t.set_(ones({2}));
        return t;
      },
      kAot);
  Tensor x = ones({2}).requires_grad_(true);
  EXPECT_THROW_MSG(f(x), "is being used in an in-place operation");
}

// Seed: test_aot_autograd_expand_mutation_functionalizes.
TEST(AotAutogradSeed, test_aot_autograd_expand_mutation_functionalizes) {
  auto fn = [](const Tensor& x) {
    Tensor y = x.expand({3, x.size(0)});
    y[0][0].add_(5);
    return y;
  };
  auto opt_fn = compile(fn, kAot);
  Tensor x = arange(6);
  Tensor x_opt = x.clone().detach();
  Tensor expected = fn(x);
  Tensor got = opt_fn(x_opt);
  EXPECT_TRUE(equal(got, expected));
  EXPECT_TRUE(equal(x, x_opt));
  EXPECT_EQ(got.impl()->storage(), x_opt.impl()->storage());  // still a view of the input
}

// Seed: test_aot_autograd_expand_mutation_backwards.
TEST(AotAutogradSeed, test_aot_autograd_expand_mutation_backwards) {
  auto fn = [](const Tensor& x, const Tensor& z) {
    Tensor y = x.expand({3, x.size(0)});
    y[1][1].mul_(5);
    return y * z;
  };
  auto opt_fn = compile(fn, kAot);
  Tensor x = arange(0.0, 6.0, 1.0);
  Tensor z = x.clone().detach(), x_opt = x.clone().detach(), z_opt = x.clone().detach();
  z.requires_grad_(true);
  z_opt.requires_grad_(true);
  Tensor res = fn(x, z);
  Tensor opt_res = opt_fn(x_opt, z_opt);
  expect_close(opt_res, res);
  res.sum().backward();
  opt_res.sum().backward();
  expect_close(x_opt, x);
  expect_close(z_opt.grad(), z.grad());
}

// Seed: test_aot_autograd_expand_mutation_error: an overlapping write fails in eager and compiled.
TEST(AotAutogradSeed, test_aot_autograd_expand_mutation_error) {
  auto fn = [](const Tensor& x) {
    Tensor y = x.expand({3, x.size(0)});
    y.slice(0, 0, 3).select(1, 0).add_(5);
    return y;
  };
  auto opt_fn = compile(fn, kAot);
  Tensor x = arange(6);
  EXPECT_THROW_MSG(fn(x), "more than one element of the written-to tensor refers to a single memory location");
  EXPECT_THROW_MSG(opt_fn(x.clone()), "more than one element of the written-to tensor refers to a single memory location");
}

// Seed: test_data_ptr_access_fails_in_forward: with fullgraph the read raises; otherwise eager runs it.
TEST(AotAutogradSeed, test_data_ptr_access_fails_in_forward) {
  auto foo = [](const Tensor& x) {
    (void)x.raw_data();
    return x.clone();
  };
  auto data_ptr_graph_input = [&](const Tensor& x) { return foo(x); };
  auto data_ptr_graph_intermediate = [&](const Tensor& x) { return foo(x.clone()); };
  Tensor x = randn({3});
  const CompileOptions strict{.backend = "aot_eager", .fullgraph = true};
  EXPECT_THROW_MSG(compile(data_ptr_graph_input, strict)(x), "Cannot access data pointer");
  EXPECT_THROW_MSG(compile(data_ptr_graph_intermediate, strict)(x), "Cannot access data pointer");
  auto lenient = compile(data_ptr_graph_intermediate, kAot);
  expect_close(lenient(x), x);
  EXPECT_EQ(lenient.counters().eager_fallbacks, 1);
}

// Seed: test_data_ptr_access_fails_in_backward: a custom backward that reads data, traced on fakes.
bool g_backward_called = false;
struct ReadsDataInBackward : Function<ReadsDataInBackward> {
  static Tensor forward(AutogradContext*, const Tensor& x) { return x.clone(); }
  static TensorList backward(AutogradContext*, const TensorList& grads) {
    g_backward_called = true;
    (void)grads[0].raw_data();
    return {grads[0].clone()};
  }
};

TEST(AotAutogradSeed, test_data_ptr_access_fails_in_backward) {
  g_backward_called = false;
  auto f = [](const Tensor& x) { return ReadsDataInBackward::apply(x); };
  Tensor x = randn({3}).requires_grad_(true);
  EXPECT_THROW_MSG(compile(f, CompileOptions{.backend = "aot_eager", .fullgraph = true})(x), "Cannot access data pointer");
  EXPECT_TRUE(g_backward_called);
}

// Seed: test_data_ptr_access_copy: copying a data-less tensor keeps its metadata.
TEST(AotAutogradSeed, test_data_ptr_access_copy) {
  Tensor x = randn({3}, {.device = kMeta});
  Tensor y = x;  // NOLINT: the copy is the point
  EXPECT_EQ(y.sizes(), x.sizes());
  EXPECT_THROW_MSG(y.raw_data(), "Cannot access data pointer");
}


// The seed's module F of the test_arg_dupe_via_dynamo_recompiles_many_* cases: a.trunc_(),
// b.trunc_(), then a sum with the parameter `mean`.
Tensor trunc_sum(Tensor a, Tensor b, const Tensor& mean) {
  a.trunc_();
  b.trunc_();
  return a + b + mean;
}

// Compiled f(x, x) then f(x, y) (fresh clones each) against eager: two compilations, the alias
// guard named as the reason. `call(f, a, b)` invokes f with the two tensors in their places.
template <typename Fn, typename Call>
void expect_dupe_then_distinct(Fn fn, const std::vector<std::string>& names, Call call, const std::string& reason) {
  Tensor a = randn({3, 3}).requires_grad_(true), b = randn({3, 3}).requires_grad_(true);
  auto f = compile(fn, {.backend = "aot_eager", .input_names = names});
  Tensor a1 = a.clone(), e1 = a.clone();
  expect_close(call(f, a1, a1), call(fn, e1, e1));
  expect_close(a1, e1);
  Tensor a2 = a.clone(), b2 = b.clone(), ea2 = a.clone(), eb2 = b.clone();
  expect_close(call(f, a2, b2), call(fn, ea2, eb2));
  expect_close(b2, eb2);
  EXPECT_EQ(f.counters().compilations, 2);  // frame_count
  ASSERT_EQ(f.counters().recompile_reasons.size(), 1u);
  EXPECT_EQ(f.counters().recompile_reasons[0], reason);
}

// Seed: test_arg_dupe_via_dynamo_recompiles_many_args_param_non_tensor_arg (ints 2 and then 3).
TEST(AotAutogradSeed, test_arg_dupe_via_dynamo_recompiles_many_args_param_non_tensor_arg) {
  Tensor mean = randn({3, 3}).requires_grad_(true);
  auto fn = [&mean](const Tensor& a, const Tensor& b, int64_t e, int64_t f) {
    return trunc_sum(a, b, mean) * static_cast<double>(e) * static_cast<double>(f);
  };
  for (int64_t k : {2, 3})
    expect_dupe_then_distinct(fn, {"a", "b", "e", "f"},
                              [k](auto& f, const Tensor& a, const Tensor& b) { return f(a, b, k, k); },
                              "input 'b' is input 'a'");
}

// Seed: test_arg_dupe_via_dynamo_recompiles_many_with_global (a captured z that is `a` itself).
TEST(AotAutogradSeed, test_arg_dupe_via_dynamo_recompiles_many_with_global) {
  Tensor mean = randn({3, 3}).requires_grad_(true);
  Tensor z = randn({3, 3}).requires_grad_(true);
  auto fn = [&](const Tensor& a, const Tensor& b, int64_t e, int64_t f) {
    return (trunc_sum(a, b, mean) + z) * static_cast<double>(e) * static_cast<double>(f);
  };
  expect_dupe_then_distinct(fn, {"a", "b", "e", "f"},
                            [](auto& f, const Tensor& a, const Tensor& b) { return f(a, b, int64_t{2}, int64_t{2}); },
                            "input 'b' is input 'a'");
}

// Seed: test_arg_dupe_via_dynamo_recompiles_many_args_param_non_tensor_arg_list (lists e and f first).
TEST(AotAutogradSeed, test_arg_dupe_via_dynamo_recompiles_many_args_param_non_tensor_arg_list) {
  Tensor mean = randn({3, 3}).requires_grad_(true);
  auto fn = [&mean](const std::vector<int64_t>& e, const std::vector<int64_t>& f, const Tensor& a, const Tensor& b) {
    return trunc_sum(a, b, mean) * static_cast<double>(e[0]) * static_cast<double>(f[0]);
  };
  for (int pass = 0; pass < 2; ++pass)
    expect_dupe_then_distinct(fn, {"e", "f", "a", "b"},
                              [](auto& f, const Tensor& a, const Tensor& b) {
                                return f(std::vector<int64_t>{3, 2, 1}, std::vector<int64_t>{4, 5, 6}, a, b);
                              },
                              "input 'b' is input 'a'");
}

// Seed: test_arg_dupe_via_dynamo_recompiles_many_args_param.
TEST(AotAutogradSeed, test_arg_dupe_via_dynamo_recompiles_many_args_param) {
  Tensor mean = randn({3, 3}).requires_grad_(true);
  auto fn = [&mean](const Tensor& a, const Tensor& b) { return trunc_sum(a, b, mean); };
  for (int pass = 0; pass < 2; ++pass)
    expect_dupe_then_distinct(fn, {"a", "b"}, [](auto& f, const Tensor& a, const Tensor& b) { return f(a, b); },
                              "input 'b' is input 'a'");
}

// Seed: test_arg_dupe_via_dynamo_recompiles_many_args: f(a1, a1, a1, a1) then f(a2, b2, b2, b2);
// then f(a3, b3, c3, c3) and f(a4, b4, c4, d4).
TEST(AotAutogradSeed, test_arg_dupe_via_dynamo_recompiles_many_args) {
  auto fn = [](Tensor a, Tensor b, Tensor c, Tensor d) {
    a.trunc_();
    b.trunc_();
    c.trunc_();
    d.trunc_();
    return std::make_tuple(a + b + c + d);
  };
  const std::vector<std::string> names{"a", "b", "c", "d"};
  Tensor a = randn({3, 3}).requires_grad_(true), b = randn({3, 3}).requires_grad_(true);
  {
    auto f = compile(fn, {.backend = "aot_eager", .input_names = names});
    Tensor a1 = a.clone(), e1 = a.clone();
    expect_close(std::get<0>(f(a1, a1, a1, a1)), std::get<0>(fn(e1, e1, e1, e1)));
    Tensor a2 = a.clone(), b2 = b.clone(), ea2 = a.clone(), eb2 = b.clone();
    expect_close(std::get<0>(f(a2, b2, b2, b2)), std::get<0>(fn(ea2, eb2, eb2, eb2)));
    EXPECT_EQ(f.counters().compilations, 2);
    ASSERT_EQ(f.counters().recompile_reasons.size(), 1u);
    EXPECT_EQ(f.counters().recompile_reasons[0], "input 'b' is input 'a'");
  }
  Tensor c = randn({3, 3}).requires_grad_(true), d = randn({3, 3}).requires_grad_(true);
  auto f = compile(fn, {.backend = "aot_eager", .input_names = names});
  Tensor a3 = a.clone(), b3 = b.clone(), c3 = c.clone();
  Tensor ea3 = a.clone(), eb3 = b.clone(), ec3 = c.clone();
  expect_close(std::get<0>(f(a3, b3, c3, c3)), std::get<0>(fn(ea3, eb3, ec3, ec3)));
  Tensor a4 = a.clone(), b4 = b.clone(), c4 = c.clone(), d4 = d.clone();
  Tensor ea4 = a.clone(), eb4 = b.clone(), ec4 = c.clone(), ed4 = d.clone();
  expect_close(std::get<0>(f(a4, b4, c4, d4)), std::get<0>(fn(ea4, eb4, ec4, ed4)));
  EXPECT_EQ(f.counters().compilations, 2);
  ASSERT_EQ(f.counters().recompile_reasons.size(), 1u);
  EXPECT_EQ(f.counters().recompile_reasons[0], "input 'd' is input 'c'");
}

// Seed: test_call_fn_with_non_const_inputs_aot_safe: a module whose forward calls a helper with its
// child's parameters passed explicitly; the exported graph matches eager and runs under aot_eager.
TEST(AotAutogradSeed, test_call_fn_with_non_const_inputs_aot_safe) {
  struct ModuleSpecialFwd {
    nn::Linear layer{10, 20};
    Tensor forward_with(const Tensor& x, const Tensor& w, const Tensor& b) { return x.matmul(w.t()) + b; }
    Tensor forward(const Tensor& x) { return forward_with(x, layer.weight(), layer.bias()); }
  } mod;
  Tensor rx = randn({3, 10, 10});
  Tensor real = mod.forward(rx);
  auto graph = graphs::export_forward([&mod](const TensorList& xs) { return TensorList{mod.forward(xs[0])}; }, {rx});
  expect_close(graph({rx})[0], real, 1e-5, 1e-6);
  auto aot_fn = compile([&graph](const Tensor& x) { return graph({x})[0]; }, kAot);
  expect_close(aot_fn(rx), real, 1e-5, 1e-6);
  EXPECT_EQ(aot_fn.counters().compilations, 1);
}

// Seed: test_multiple_aot_autograd_calls_dupe_args: the graph split in two compiled pieces, the
// first returning (y, y) for small inputs, so the second sees duplicated arguments and writes one.
TEST(AotAutogradSeed, test_multiple_aot_autograd_calls_dupe_args) {
  auto maybe_dupe_op = [](const Tensor& x) {
    Tensor y = x + 1, z = x + 2;
    return x.numel() < 5 ? std::make_tuple(y, y) : std::make_tuple(y, z);
  };
  auto mul_inplace = [](Tensor b, const Tensor& c) { return std::make_tuple(b.mul_(c)); };
  auto submod_0 = compile(maybe_dupe_op, kAot);
  auto submod_1 = compile(mul_inplace, kAot);
  auto f = [&](const Tensor& a) {
    auto [b, c] = submod_0(a);
    return std::get<0>(submod_1(b, c));
  };
  expect_close(f(ones({4})), full({4}, 4.0));  // (1 + 1) * (1 + 1), b and c one tensor
  expect_close(f(ones({6})), full({6}, 6.0));  // (1 + 1) * (1 + 2)
  EXPECT_EQ(submod_1.counters().compilations, 2);
}

// Seed: test_aot_export_joint_simple_repro: the backend exports the forward graph of a module
// with trace_joint = false and runs it.
TEST(AotAutogradSeed, test_aot_export_joint_simple_repro) {
  nn::Linear linear(5, 7);
  auto model = [&linear](const TensorList& xs) { return TensorList{linear(xs[0])}; };
  Tensor sample = rand({3, 4, 5});
  Tensor out_ref = model({sample})[0];
  graphs::ExportedForward exported = graphs::export_forward(model, {sample});
  expect_close(exported({sample})[0], out_ref, 1e-5, 1e-6);
  EXPECT_EQ(exported.captured().size(), 2u);  // weight and bias
}

}  // namespace
}  // namespace tg
