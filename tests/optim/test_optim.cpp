// Optimizers against update rules computed by hand in double precision, kernel counts per step,
// and end-to-end training that must reduce a loss.
#include <cmath>
#include <functional>
#include <memory>
#include <vector>

#include "nn/nn.h"
#include "ops/core/dispatch.h"
#include "optim/optim.h"
#include "support/test_support.h"

namespace tg {
namespace {

using testing::expect_close;
using Vec = std::vector<double>;

const Vec kInit = {0.5, -1.25, 2.0, 0.0};
const Vec kCurv = {1.0, 0.5, 2.0, 3.0};

// The gradient at step t (1-based) for parameter values p: a quadratic's slope plus a drift, so
// successive gradients differ in size and sign.
Vec grad_at(const Vec& p, int t) {
  Vec g(p.size());
  for (size_t i = 0; i < p.size(); ++i) g[i] = 2.0 * kCurv[i] * p[i] + 0.1 * t - 0.3 * static_cast<double>(i);
  return g;
}

Tensor to_tensor(const Vec& v) { return from_vector(v, {static_cast<int64_t>(v.size())}); }

// Runs `steps` steps of `opt` on p, feeding grad_at(current p), and compares with `reference`,
// which updates its own copy of p from the same gradient.
void expect_matches(optim::Optimizer& opt, Tensor p, int steps, const std::function<void(Vec&, const Vec&, int)>& reference) {
  Vec ref = kInit;
  for (int t = 1; t <= steps; ++t) {
    const Vec g = grad_at(ref, t);
    p.set_grad(to_tensor(g));
    opt.step();
    reference(ref, g, t);
    expect_close(p, to_tensor(ref), 1e-12, 1e-12);
  }
}

Tensor param() { return to_tensor(kInit).requires_grad_(); }

struct SgdRef {
  double lr, momentum = 0, dampening = 0, wd = 0;
  bool nesterov = false;
  Vec buf;
  void operator()(Vec& p, const Vec& grad, int t) {
    if (buf.empty()) buf.assign(p.size(), 0.0);
    for (size_t i = 0; i < p.size(); ++i) {
      double g = grad[i] + wd * p[i];
      if (momentum != 0) {
        buf[i] = t == 1 ? g : momentum * buf[i] + (1 - dampening) * g;
        g = nesterov ? g + momentum * buf[i] : buf[i];
      }
      p[i] -= lr * g;
    }
  }
};

struct AdamRef {
  double lr, b1 = 0.9, b2 = 0.999, eps = 1e-8, wd = 0;
  bool decoupled = false;
  Vec m, v;
  void operator()(Vec& p, const Vec& grad, int t) {
    if (m.empty()) m.assign(p.size(), 0.0), v.assign(p.size(), 0.0);
    for (size_t i = 0; i < p.size(); ++i) {
      double g = grad[i];
      if (decoupled) p[i] *= 1 - lr * wd;
      else g += wd * p[i];
      m[i] = b1 * m[i] + (1 - b1) * g;
      v[i] = b2 * v[i] + (1 - b2) * g * g;
      const double mhat = m[i] / (1 - std::pow(b1, t));
      const double vhat = v[i] / (1 - std::pow(b2, t));
      p[i] -= lr * mhat / (std::sqrt(vhat) + eps);
    }
  }
};

TEST(SGD, Plain) {
  Tensor p = param();
  optim::SGD opt({p}, {.lr = 0.1});
  expect_matches(opt, p, 5, SgdRef{.lr = 0.1});
}

TEST(SGD, MomentumWithDampening) {
  Tensor p = param();
  optim::SGD opt({p}, {.lr = 0.05, .momentum = 0.9, .dampening = 0.2});
  expect_matches(opt, p, 6, SgdRef{.lr = 0.05, .momentum = 0.9, .dampening = 0.2});
}

TEST(SGD, Nesterov) {
  Tensor p = param();
  optim::SGD opt({p}, {.lr = 0.05, .momentum = 0.8, .nesterov = true});
  expect_matches(opt, p, 6, SgdRef{.lr = 0.05, .momentum = 0.8, .nesterov = true});
}

TEST(SGD, WeightDecayWithMomentum) {
  Tensor p = param();
  optim::SGD opt({p}, {.lr = 0.05, .momentum = 0.5, .weight_decay = 0.1});
  expect_matches(opt, p, 6, SgdRef{.lr = 0.05, .momentum = 0.5, .wd = 0.1});
}

TEST(SGD, WeightDecayPlain) {
  Tensor p = param();
  optim::SGD opt({p}, {.lr = 0.1, .weight_decay = 0.3});
  expect_matches(opt, p, 4, SgdRef{.lr = 0.1, .wd = 0.3});
}

TEST(Adam, Default) {
  Tensor p = param();
  optim::Adam opt({p}, {.lr = 0.01});
  expect_matches(opt, p, 8, AdamRef{.lr = 0.01});
  EXPECT_EQ(opt.step_count(), 8);
}

TEST(Adam, BetasEpsAndCoupledWeightDecay) {
  Tensor p = param();
  optim::Adam opt({p}, {.lr = 0.02, .beta1 = 0.8, .beta2 = 0.99, .eps = 1e-3, .weight_decay = 0.1});
  expect_matches(opt, p, 8, AdamRef{.lr = 0.02, .b1 = 0.8, .b2 = 0.99, .eps = 1e-3, .wd = 0.1});
}

TEST(AdamW, DecoupledWeightDecay) {
  Tensor p = param();
  optim::AdamW opt({p}, {.lr = 0.02, .weight_decay = 0.1});
  expect_matches(opt, p, 8, AdamRef{.lr = 0.02, .wd = 0.1, .decoupled = true});
}

TEST(AdamW, DefaultDecayIsOnePercent) {
  Tensor p = param();
  optim::AdamW opt({p});
  EXPECT_DOUBLE_EQ(opt.options().weight_decay, 1e-2);
  expect_matches(opt, p, 3, AdamRef{.lr = 1e-3, .wd = 1e-2, .decoupled = true});
}

TEST(Optimizer, SkipsParametersWithoutGrad) {
  Tensor a = param(), b = param();
  optim::Adam opt({a, b}, {.lr = 0.1});
  a.set_grad(ones_like(a));
  opt.step();
  expect_close(b, to_tensor(kInit), 0, 0);
  // b's first update uses the bias correction of its own first step.
  b.set_grad(ones_like(b));
  a.set_grad(Tensor());
  opt.step();
  Vec ref = kInit;
  AdamRef{.lr = 0.1}(ref, Vec(4, 1.0), 1);
  expect_close(b, to_tensor(ref), 1e-12, 1e-12);
}

TEST(Optimizer, ZeroGrad) {
  Tensor p = param();
  optim::SGD opt({p}, {.lr = 0.1});
  p.set_grad(ones_like(p));
  opt.zero_grad(/*set_to_none=*/false);
  ASSERT_TRUE(p.grad().defined());
  expect_close(p.grad(), zeros_like(p), 0, 0);
  opt.zero_grad();
  EXPECT_FALSE(p.grad().defined());
}

TEST(Optimizer, RejectsBadInput) {
  Tensor p = param();
  EXPECT_THROW_MSG(optim::SGD({p}, {.lr = -1}), "invalid learning rate: -1");
  EXPECT_THROW_MSG(optim::SGD({p}, {.lr = 0.1, .nesterov = true}), "Nesterov momentum requires a momentum");
  EXPECT_THROW_MSG(optim::SGD({p}, {.lr = 0.1, .momentum = -0.5}), "invalid momentum value");
  EXPECT_THROW_MSG(optim::Adam({p}, {.beta1 = 1.0}), "invalid beta parameter at index 0");
  EXPECT_THROW_MSG(optim::AdamW({p}, {.beta2 = -0.1}), "[AdamW] invalid beta parameter at index 1");
  EXPECT_THROW_MSG(optim::SGD({p * 2}), "can't optimize a non-leaf Tensor");
  EXPECT_THROW_MSG(optim::SGD({zeros({2})}), "requires_grad=false");
  EXPECT_THROW_MSG(optim::SGD({p, p}), "appears twice");
  optim::SGD opt({p});
  opt.set_lr(0.5);
  EXPECT_DOUBLE_EQ(opt.lr(), 0.5);
  EXPECT_THROW_MSG(opt.set_lr(-0.1), "invalid learning rate");
}

// Counts dispatched ops, to hold the per-step kernel budget.
class OpCounter : public OpObserver {
 public:
  void before_op(const OpPtr&, TensorList&) override {}
  bool wants_fake_outputs(const OpPtr&, const TensorList&) override { return false; }
  void on_op(const OpPtr&, const TensorList&, const TensorList&) override { ++count; }
  int count = 0;
};

int ops_in_step(optim::Optimizer& opt, const TensorList& params) {
  for (const Tensor& p : params) p.set_grad(ones_like(p));
  OpCounter counter;
  OpObserverGuard guard(&counter);
  opt.step();
  return counter.count;
}

TEST(Optimizer, KernelsPerStep) {
  const TensorList params = {param(), param(), param()};
  optim::SGD plain(params, {.lr = 0.1});
  EXPECT_EQ(ops_in_step(plain, params), 3);  // one p.add_(g, -lr) per parameter

  optim::SGD momentum(params, {.lr = 0.1, .momentum = 0.9});
  ops_in_step(momentum, params);  // first step creates the buffers
  EXPECT_EQ(ops_in_step(momentum, params), 3 * 3);

  optim::Adam adam(params, {.lr = 0.1});
  ops_in_step(adam, params);  // first step creates the moments
  EXPECT_EQ(ops_in_step(adam, params), 3 * 9);

  // Capturable (the compiled and graphed path): one fused op for the whole group, once SGD's
  // momentum buffers exist.
  optim::SGD fused_sgd(params, {.lr = 0.1, .momentum = 0.9});
  fused_sgd.set_capturable(true);
  ops_in_step(fused_sgd, params);
  EXPECT_EQ(ops_in_step(fused_sgd, params), 1);
  optim::Adam fused(params, {.lr = 0.1});
  fused.set_capturable(true);
  ops_in_step(fused, params);
  EXPECT_EQ(ops_in_step(fused, params), 1);
}

// Fits y = 3 x0 - 2 x1 + 0.5 with a Linear layer; the loss must drop by orders of magnitude.
double fit_linear(const std::function<std::unique_ptr<optim::Optimizer>(TensorList)>& make_opt, int steps) {
  manual_seed(0);
  const Tensor x = randn({64, 2});
  const Tensor y = (x.select(1, 0) * 3.0 - x.select(1, 1) * 2.0 + 0.5).unsqueeze(1);
  nn::Linear model(2, 1);
  auto opt = make_opt(model.parameters());
  const double first = mse_loss(model(x), y).item<float>();
  double last = first;
  for (int i = 0; i < steps; ++i) {
    Tensor loss = mse_loss(model(x), y);
    opt->zero_grad();
    loss.backward();
    opt->step();
    last = loss.item<float>();
  }
  EXPECT_GT(first, 1.0);
  return last / first;
}

TEST(EndToEnd, LinearRegressionLossFalls) {
  EXPECT_LT(fit_linear([](TensorList p) { return std::make_unique<optim::SGD>(std::move(p), optim::SGDOptions{.lr = 0.1}); }, 200), 1e-4);
  EXPECT_LT(fit_linear([](TensorList p) {
    return std::make_unique<optim::SGD>(std::move(p), optim::SGDOptions{.lr = 0.05, .momentum = 0.9, .nesterov = true});
  }, 200), 1e-4);
  EXPECT_LT(fit_linear([](TensorList p) { return std::make_unique<optim::Adam>(std::move(p), optim::AdamOptions{.lr = 0.05}); }, 300), 1e-3);
}

// A small MLP learns a nonlinear target (|x|), which a linear model cannot.
TEST(EndToEnd, MlpLearnsNonlinearTarget) {
  manual_seed(1);
  const Tensor x = rand({128, 1}) * 4.0 - 2.0;
  const Tensor y = x.abs();
  nn::Sequential model{std::make_shared<nn::Linear>(1, 32), std::make_shared<nn::ReLU>(),
                       std::make_shared<nn::Linear>(32, 1)};
  optim::AdamW opt(model.parameters(), {.lr = 0.01, .weight_decay = 1e-4});
  const double first = mse_loss(model(x), y).item<float>();
  for (int i = 0; i < 500; ++i) {
    Tensor loss = mse_loss(model(x), y);
    opt.zero_grad();
    loss.backward();
    opt.step();
  }
  EXPECT_LT(mse_loss(model(x), y).item<float>(), 0.01 * first);
  EXPECT_LT(mse_loss(model(x), y).item<float>(), 5e-3);
}

TEST(OptimizerCuda, MatchesCpu) {
  TG_REQUIRE_CUDA();
  for (int kind = 0; kind < 3; ++kind) {
    Tensor pc = param(), pg = to_tensor(kInit).cuda().requires_grad_();
    std::unique_ptr<optim::Optimizer> oc, og;
    if (kind == 0) {
      oc = std::make_unique<optim::SGD>(TensorList{pc}, optim::SGDOptions{.lr = 0.1, .momentum = 0.9, .nesterov = true});
      og = std::make_unique<optim::SGD>(TensorList{pg}, optim::SGDOptions{.lr = 0.1, .momentum = 0.9, .nesterov = true});
    } else if (kind == 1) {
      oc = std::make_unique<optim::Adam>(TensorList{pc}, optim::AdamOptions{.lr = 0.1, .weight_decay = 0.1});
      og = std::make_unique<optim::Adam>(TensorList{pg}, optim::AdamOptions{.lr = 0.1, .weight_decay = 0.1});
    } else {
      oc = std::make_unique<optim::AdamW>(TensorList{pc}, optim::AdamOptions{.lr = 0.1, .weight_decay = 0.1});
      og = std::make_unique<optim::AdamW>(TensorList{pg}, optim::AdamOptions{.lr = 0.1, .weight_decay = 0.1});
    }
    for (int t = 1; t <= 4; ++t) {
      const Tensor g = to_tensor(grad_at(pc.to_vector<double>(), t));
      pc.set_grad(g);
      pg.set_grad(g.cuda());
      oc->step();
      og->step();
      expect_close(pg, pc, 1e-10, 1e-12);
    }
  }
}

}  // namespace
}  // namespace tg
