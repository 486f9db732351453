// softmax and log_softmax on CUDA (ops/norm/cuda/softmax_kernels.cuh).
#include "ops/norm/cuda/softmax_kernels.cuh"

namespace tg::cuda {

void softmax_forward_rows(const Tensor& a, int64_t dim, Tensor& out) {
  softmax_detail::rows<SoftmaxMode::Softmax>(a, Tensor(), dim, out);
}

void log_softmax_forward_rows(const Tensor& a, int64_t dim, Tensor& out) {
  softmax_detail::rows<SoftmaxMode::LogSoftmax>(a, Tensor(), dim, out);
}

}  // namespace tg::cuda
