// Training-mode batch normalization as one op (statistics, normalization, affine and the
// running-statistics blend) with one backward op: what batch_norm() runs for float32
// and float64 inputs. The kernels: loops on the CPU, three launches per direction on CUDA.
#pragma once

#include <optional>

#include "tensor/tensor.h"

namespace tg {

// The outputs of batch_norm_training.
struct BatchNormTrainingResult {
  Tensor output;        // normalized input, scaled by weight and shifted by bias
  Tensor running_mean;  // (1 - momentum) * running_mean + momentum * batch mean (undefined without running stats)
  Tensor running_var;   // the same blend with the unbiased batch variance
};

// Normalizes input [N, C, *] with its batch statistics over all dims but 1. weight and bias are [C]
// (both defined); running_mean / running_var are [C] or both undefined. The blended running
// statistics are returned, not written: the caller copies them into its buffers.
BatchNormTrainingResult batch_norm_training(const Tensor& input, const Tensor& weight, const Tensor& bias,
                                            const Tensor& running_mean, const Tensor& running_var, double momentum,
                                            double eps);

// The kernels behind batch_norm_training, on contiguous tensors viewed as [N, C, S] (S: the product
// of the trailing dims), with outputs allocated by the dispatcher.
struct BatchNormKernelArgs {
  int64_t N = 0, C = 0, S = 0;
  double momentum = 0.1, eps = 1e-5;
};
// y, save_mean, save_invstd and, when running_mean is defined, new_mean / new_var.
void cpu_batch_norm_forward(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& running_mean,
                            const Tensor& running_var, const Tensor& y, const Tensor& save_mean,
                            const Tensor& save_invstd, const Tensor& new_mean, const Tensor& new_var,
                            const BatchNormKernelArgs& a);
// gx, gw, gb from grad_output gy and the forward's saved statistics.
void cpu_batch_norm_backward(const Tensor& gy, const Tensor& x, const Tensor& w, const Tensor& save_mean,
                             const Tensor& save_invstd, const Tensor& gx, const Tensor& gw, const Tensor& gb,
                             const BatchNormKernelArgs& a);

namespace cuda {
// The same two on the current stream (double accumulation, no host synchronization).
void batch_norm_forward(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& running_mean,
                        const Tensor& running_var, const Tensor& y, const Tensor& save_mean, const Tensor& save_invstd,
                        const Tensor& new_mean, const Tensor& new_var, const BatchNormKernelArgs& a);
void batch_norm_backward(const Tensor& gy, const Tensor& x, const Tensor& w, const Tensor& save_mean,
                         const Tensor& save_invstd, const Tensor& gx, const Tensor& gw, const Tensor& gb,
                         const BatchNormKernelArgs& a);
}  // namespace cuda

}  // namespace tg
