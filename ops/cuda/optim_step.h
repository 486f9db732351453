// CUDA launcher of the fused Adam step: one kernel for up to kAdamTensorsPerLaunch parameters.
#pragma once

#include "ops/optim_step.h"

namespace tg::cuda {

// Updates params/exp_avgs/exp_avg_sqs/steps in place (validated by the op).
void adam_step(const TensorList& params, const TensorList& grads, const TensorList& exp_avgs,
               const TensorList& exp_avg_sqs, const TensorList& steps, const AdamStepOptions& options);

}  // namespace tg::cuda
