// The backward of softmax and log_softmax on CUDA (ops/norm/cuda/softmax_kernels.cuh).
#include "ops/norm/cuda/softmax_kernels.cuh"

namespace tg::cuda {

void softmax_backward_rows(const Tensor& a, const Tensor& b, int64_t dim, Tensor& out) {
  softmax_detail::rows<SoftmaxMode::SoftmaxBackward>(a, b, dim, out);
}

void log_softmax_backward_rows(const Tensor& a, const Tensor& b, int64_t dim, Tensor& out) {
  softmax_detail::rows<SoftmaxMode::LogSoftmaxBackward>(a, b, dim, out);
}

}  // namespace tg::cuda
