// CUDA launchers of the fused optimizer steps: one multi-tensor kernel launch for up to 384 parameters
// (Adam adds one that advances the step counts); 16-bit floats compute in float32.
#pragma once

#include "ops/optim/optim_step.h"

namespace tg::cuda {

// Updates params/exp_avgs/exp_avg_sqs/steps in place (validated by the op).
void adam_step(const TensorList& params, const TensorList& grads, const TensorList& exp_avgs,
               const TensorList& exp_avg_sqs, const TensorList& steps, const AdamStepOptions& options,
               const Tensor& skip_if, const AdamStepScalars& scalars);

// Each does nothing when skip_if (a defined float32 scalar on the device) is nonzero, as the kernels
// decide, and reads each hyperparameter from its device scalar (float32 or float64) when it is
// defined, from the options otherwise.
// Updates params (and momentum_buffers, when not empty) in place (validated by the op).
void sgd_step(const TensorList& params, const TensorList& grads, const TensorList& momentum_buffers,
              const SgdStepOptions& options, const Tensor& skip_if, const SgdStepScalars& scalars);

}  // namespace tg::cuda
