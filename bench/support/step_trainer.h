// A training step of the benchmarks: a loss of a fixed batch, SGD over the parameters, stepped
// eagerly or with the forward, backward and optimizer update compiled as CUDA graphs (three graph
// launches a step). Shared by every step benchmark.
#pragma once

#include <functional>
#include <memory>
#include <optional>

#include "bench/support/capture_mode.h"
#include "tapegraph.h"

namespace bench {

struct StepTrainer {
  using LossFn = std::function<tg::Tensor(const tg::Tensor&, const tg::Tensor&)>;
  tg::Tensor x, y;
  std::unique_ptr<tg::optim::SGD> sgd;
  std::unique_ptr<tg::optim::CompiledStep> compiled_step;
  LossFn loss;

  // The compile options of a compiled step: the cudagraphs backend with every default (fusions and
  // branch streams on, the backward products' gradient epilogues off), strict with TG_STRICT_CAPTURE.
  static tg::CompileOptions compiled_defaults() { return capture_mode({.backend = "cudagraphs"}); }
  // compiled_defaults() when `compiled`, else nothing (an eager step).
  static std::optional<tg::CompileOptions> compiled_if(bool compiled) {
    return compiled ? std::optional(compiled_defaults()) : std::nullopt;
  }

  // loss(x, y) over `params`, SGD with `options`; eager without `compile`, else the loss compiled
  // with `compile` and the update with the cudagraphs backend, the batch marked static as a
  // hand-captured step reads it in place.
  StepTrainer(LossFn eager_loss, tg::TensorList params, tg::Tensor xs, tg::Tensor ys, tg::optim::SGDOptions options,
              std::optional<tg::CompileOptions> compile)
      : x(std::move(xs)), y(std::move(ys)) {
    sgd = std::make_unique<tg::optim::SGD>(std::move(params), options);
    if (!compile) {
      loss = std::move(eager_loss);
      return;
    }
    tg::mark_static_address(x);
    tg::mark_static_address(y);
    auto f = std::make_shared<tg::Compiled<LossFn>>(std::move(eager_loss), *compile);
    loss = [f](const tg::Tensor& a, const tg::Tensor& b) { return (*f)(a, b); };
    compiled_step = std::make_unique<tg::optim::CompiledStep>(*sgd, compiled_defaults());
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
