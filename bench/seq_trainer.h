// A training step of any model (loss of fixed x, y; SGD), eager or compiled with the cudagraphs
// backend (forward, backward and optimizer graphs), shared by the sequence-model benchmarks.
#pragma once

#include <functional>
#include <memory>

#include "tapegraph.h"

namespace bench {

// loss(x, y) over `params`; compiled: the batch is marked static (as a hand-captured step reads it in place).
struct SeqTrainer {
  using LossFn = std::function<tg::Tensor(const tg::Tensor&, const tg::Tensor&)>;
  tg::Tensor x, y;
  std::unique_ptr<tg::optim::SGD> sgd;
  std::unique_ptr<tg::optim::CompiledStep> compiled_step;
  LossFn loss;

  SeqTrainer(LossFn eager_loss, tg::TensorList params, tg::Tensor xs, tg::Tensor ys, double lr, bool compiled)
      : x(std::move(xs)), y(std::move(ys)) {
    sgd = std::make_unique<tg::optim::SGD>(std::move(params), tg::optim::SGDOptions{.lr = lr});
    if (!compiled) {
      loss = std::move(eager_loss);
      return;
    }
    tg::mark_static_address(x);
    tg::mark_static_address(y);
    auto f = std::make_shared<tg::Compiled<LossFn>>(eager_loss, tg::CompileOptions{.backend = "cudagraphs"});
    loss = [f](const tg::Tensor& a, const tg::Tensor& b) { return (*f)(a, b); };
    compiled_step = std::make_unique<tg::optim::CompiledStep>(*sgd);
  }

  void step() {
    tg::Tensor l = loss(x, y);
    sgd->zero_grad();
    l.backward();
    if (compiled_step) {
      compiled_step->step();
    } else {
      sgd->step();
    }
  }
};

}  // namespace bench
