// A training step of the benchmarks: a loss of a fixed batch, SGD over the parameters, stepped
// eagerly or with the forward, backward and optimizer update compiled as CUDA graphs (three graph
// launches a step). Shared by every step benchmark.
#pragma once

#include <functional>
#include <memory>

#include "tapegraph.h"

namespace bench {

struct StepTrainer {
  using LossFn = std::function<tg::Tensor(const tg::Tensor&, const tg::Tensor&)>;
  tg::Tensor x, y;
  std::unique_ptr<tg::optim::SGD> sgd;
  std::unique_ptr<tg::optim::CompiledStep> compiled_step;
  LossFn loss;

  // loss(x, y) over `params`, SGD with `options`; compiled with the cudagraphs backend (with or
  // without the fusions: epilogues and generated elementwise kernels; the backward products'
  // gradient epilogues on request), the batch marked static as a hand-captured step reads it in place.
  StepTrainer(LossFn eager_loss, tg::TensorList params, tg::Tensor xs, tg::Tensor ys, tg::optim::SGDOptions options,
              bool compiled, bool fuse = true, bool gradient_epilogues = false)
      : x(std::move(xs)), y(std::move(ys)) {
    sgd = std::make_unique<tg::optim::SGD>(std::move(params), options);
    if (!compiled) {
      loss = std::move(eager_loss);
      return;
    }
    tg::mark_static_address(x);
    tg::mark_static_address(y);
    auto f = std::make_shared<tg::Compiled<LossFn>>(
        std::move(eager_loss), tg::CompileOptions{.backend = "cudagraphs", .fuse_epilogues = fuse, .fuse_elementwise = fuse,
                                             .fuse_gradient_epilogues = gradient_epilogues});
    loss = [f](const tg::Tensor& a, const tg::Tensor& b) { return (*f)(a, b); };
    compiled_step = std::make_unique<tg::optim::CompiledStep>(*sgd);
  }

  // One step: loss, zero_grad, backward, update; returns the loss.
  tg::Tensor step() {
    tg::Tensor l = loss(x, y);
    sgd->zero_grad();
    l.backward();
    if (compiled_step) compiled_step->step();
    else sgd->step();
    return l;
  }
};

// The cross-entropy of a classifier `model` on (x, y).
inline StepTrainer::LossFn classifier_loss(std::shared_ptr<tg::nn::Module> model) {
  return [model](const tg::Tensor& a, const tg::Tensor& b) { return tg::cross_entropy((*model)(a), b); };
}

}  // namespace bench
