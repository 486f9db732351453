// An optimizer step run as a compiled function: with the cudagraphs backend, one CUDA graph launch
// updates every parameter in place.
#pragma once

#include <functional>
#include <memory>

#include "graphs/compile.h"
#include "optim/optimizer.h"

namespace tg::optim {

// Compiles `optimizer.update(grads)` with the gradients as arguments; parameters and optimizer
// state are captured tensors (static addresses). The first step runs eagerly so that the state
// exists (and lives on the device) before it is traced. The optimizer is made capturable, so its
// fused update reads the learning rate from the device: a scheduler's new value is a fill, and the
// compiled step neither re-traces nor re-records (an update that reads the host value instead, as
// the unfused one does, guards it and recompiles on a change). The other numeric hyperparameters
// (momentum, dampening, betas, eps, weight decay) are read from the device the same way; structural
// changes (SGD's momentum turning from zero to nonzero, which creates momentum buffers in an eager
// step, or back) re-trace once.
class CompiledStep {
 public:
  explicit CompiledStep(Optimizer& optimizer, CompileOptions options = {.backend = "cudagraphs"});
  // One update from the parameters' current gradients (eager when some parameter has none, or when
  // the optimizer must create state first).
  void step();
  // Counters of the compiled update (empty before the second step).
  const graphs::CompileCounters& counters() const;
  // Runs `transform` on the gradients before every update, inside the compiled update (eager steps
  // too), e.g. [](const TensorList& g) { tg::nn::utils::clip_norm_(g, 1.0); } to clip them as
  // clip_grad_norm_ before step() would, in the same graph. Its in-place writes reach the parameters'
  // .grad as eager code's would. Setting it again traces the update again.
  void set_grad_transform(std::function<void(const TensorList& grads)> transform);

 private:
  Optimizer& optimizer_;
  CompileOptions options_;
  std::unique_ptr<graphs::CompiledFunction> compiled_;
  std::function<void(const TensorList&)> transform_;
  bool warmed_up_ = false;
};

}  // namespace tg::optim
