// Parameter initializers, as in torch.nn.init; each fills a tensor in place without recording grad.
#pragma once

#include <utility>

#include "tensor/tensor.h"

namespace tg::nn::init {

// (fan_in, fan_out) of a weight: dims 1 and 0 times the product of any further (receptive) dims.
std::pair<int64_t, int64_t> fan_in_and_fan_out(const Tensor& weight);

// Draws from U(low, high) using the global generator (reproducible after tg::manual_seed).
Tensor& uniform_(Tensor& t, double low, double high);
// Draws from N(mean, std^2).
Tensor& normal_(Tensor& t, double mean = 0.0, double std = 1.0);
Tensor& zeros_(Tensor& t);
// He init with the leaky-ReLU gain for slope `a`, on fan_in: U(-b, b) with b = gain * sqrt(3 / fan_in).
Tensor& kaiming_uniform_(Tensor& t, double a = 0.0);
// Glorot init: U(-b, b) with b = gain * sqrt(6 / (fan_in + fan_out)).
Tensor& xavier_uniform_(Tensor& t, double gain = 1.0);

// While alive, uniform_, normal_ and the initializers built on them, called on this thread, only
// advance the generator past their draws and leave the tensor as it was (uninitialized memory stays
// so: the owner must initialize it again). For a module that builds submodules and then initializes
// their parameters again itself (GPT does): their default draws cost no time, and every later draw
// keeps its value. Guards nest.
class SkipDrawsGuard {
 public:
  SkipDrawsGuard();
  ~SkipDrawsGuard();
  SkipDrawsGuard(const SkipDrawsGuard&) = delete;
  SkipDrawsGuard& operator=(const SkipDrawsGuard&) = delete;

 private:
  bool previous_;
};

// True inside a SkipDrawsGuard on this thread.
bool skipping_draws();

}  // namespace tg::nn::init
