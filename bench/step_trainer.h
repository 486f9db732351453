// A training step of the benchmarks: a model, its fixed batch and SGD, stepped eagerly or with the
// forward, backward and optimizer update compiled as CUDA graphs (three graph launches a step).
#pragma once

#include <functional>
#include <memory>

#include "tapegraph.h"

namespace bench {

struct StepTrainer {
  std::shared_ptr<tg::nn::Module> model;
  tg::Tensor x, y;
  std::unique_ptr<tg::optim::SGD> sgd;
  std::unique_ptr<tg::optim::CompiledStep> compiled_step;
  std::function<tg::Tensor(const tg::Tensor&, const tg::Tensor&)> loss;

  // Cross-entropy of `m` on (xs, ys), SGD with `options`; compiled with the cudagraphs backend (with
  // or without the epilogue fusions) or eager.
  StepTrainer(std::shared_ptr<tg::nn::Module> m, tg::Tensor xs, tg::Tensor ys, tg::optim::SGDOptions options,
              bool compiled, bool fuse_epilogues = true)
      : model(std::move(m)), x(std::move(xs)), y(std::move(ys)) {
    sgd = std::make_unique<tg::optim::SGD>(model->parameters(), options);
    auto eager_loss = [m = model](const tg::Tensor& a, const tg::Tensor& b) { return tg::cross_entropy((*m)(a), b); };
    if (!compiled) {
      loss = eager_loss;
      return;
    }
    // The batch lives in fixed buffers (as in a hand-captured step, whose data loader refills
    // them), so the graphs read it in place instead of copying it in.
    tg::mark_static_address(x);
    tg::mark_static_address(y);
    auto f = std::make_shared<tg::Compiled<decltype(eager_loss)>>(eager_loss, tg::CompileOptions{.backend = "cudagraphs", .fuse_epilogues = fuse_epilogues});
    loss = [f](const tg::Tensor& a, const tg::Tensor& b) { return (*f)(a, b); };
    compiled_step = std::make_unique<tg::optim::CompiledStep>(*sgd);
  }

  // One step: loss, zero_grad, backward, update.
  void step() {
    tg::Tensor l = loss(x, y);
    sgd->zero_grad();
    l.backward();
    if (compiled_step) compiled_step->step();
    else sgd->step();
  }
};

}  // namespace bench
