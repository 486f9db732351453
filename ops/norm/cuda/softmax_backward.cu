// The CUDA backward of softmax and log_softmax (ops/norm/cuda/softmax_kernels.cuh).
#include "ops/norm/cuda/softmax_kernels.cuh"

namespace tg::cuda {

void softmax_backward_rows(SoftmaxMode mode, const Tensor& a, const Tensor& b, int64_t dim, Tensor& out) {
  softmax_detail::rows<SoftmaxMode::SoftmaxBackward, SoftmaxMode::LogSoftmaxBackward>(mode, a, b, dim, out);
}

}  // namespace tg::cuda
