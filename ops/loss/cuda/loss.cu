// CUDA kernels for nll_loss, the fused cross_entropy and their backward. A batch of up to 64K
// samples reduces in a single block (one launch); larger batches write per-sample losses first. Samples
// whose target is ignore_index add nothing, and Mean divides by the number of the others.
#include "ops/loss/cuda/loss.h"

#include <cub/block/block_reduce.cuh>

#include <cmath>
#include <limits>

#include "ops/factory/factory.h"
#include "ops/core/cuda/lane_reduce.cuh"
#include "ops/norm/cuda/softmax.h"
#include "tensor/cuda/cuda_check.h"
#include "tensor/cuda/device_error.h"

namespace tg::cuda {
namespace {

// Where sample n's log-probabilities and class index live, and where a bad target is reported.
struct NllLayout {
  const int64_t* target;
  int64_t rows, classes, row_stride, class_stride, target_stride, ignore_index;
  DeviceErrorRecord* error;
};

NllLayout nll_layout(const Tensor& input, const Tensor& target, int64_t ignore_index) {
  const bool batched = input.dim() == 2;
  return {target.data_ptr<int64_t>(),
          batched ? input.sizes()[0] : 1,
          input.sizes().back(),
          batched ? input.strides()[0] : 0,
          input.strides().back(),
          batched ? target.strides()[0] : 0,
          ignore_index,
          device_error_record(input.device().index)};
}

// True when sample n counts (its target is not ignore_index).
__device__ __forceinline__ bool counted(const NllLayout& l, int64_t n) {
  return l.target[n * l.target_stride] != l.ignore_index;
}

// -input[n, target[n]], 0 for an ignored sample, or NaN when the target is not a valid class (then
// reported, and raised at the next host synchronization).
template <typename T>
__device__ __forceinline__ T nll_term(const T* x, const NllLayout& l, int64_t n) {
  const int64_t t = l.target[n * l.target_stride];
  if (t == l.ignore_index) return T(0);
  if (t < 0 || t >= l.classes) {
    report_device_error(l.error, DeviceErrorOp::NllLoss, t, l.classes, 0, n);
    return std::numeric_limits<T>::quiet_NaN();
  }
  return -x[n * l.row_stride + t * l.class_stride];
}

template <typename T>
__global__ void nll_none_kernel(const T* x, NllLayout l, T* out) {
  const int64_t n = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (n < l.rows) out[n] = nll_term(x, l, n);
}

constexpr int kSingleBlockThreads = 512;

// The number of counted samples, summed by one block of kSingleBlockThreads threads (the result is
// valid on thread 0 only, as with cub::BlockReduce).
__device__ __forceinline__ long long block_count(const NllLayout& l) {
  using CountReduce = cub::BlockReduce<long long, kSingleBlockThreads>;
  __shared__ typename CountReduce::TempStorage temp;
  long long local = 0;
  for (int64_t n = threadIdx.x; n < l.rows; n += kSingleBlockThreads) local += counted(l, n);
  return CountReduce(temp).Sum(local);
}

template <typename T>
__global__ void __launch_bounds__(kSingleBlockThreads) nll_reduce_kernel(const T* x, NllLayout l, T* out, bool mean) {
  using BlockReduce = cub::BlockReduce<T, kSingleBlockThreads>;
  __shared__ typename BlockReduce::TempStorage temp;
  T local = 0;
  for (int64_t n = threadIdx.x; n < l.rows; n += kSingleBlockThreads) local += nll_term(x, l, n);
  const T total = BlockReduce(temp).Sum(local);
  const long long count = mean ? block_count(l) : 1;
  if (threadIdx.x == 0) out[0] = mean ? total / static_cast<T>(count) : total;
}

// scale[0] = 1 / (number of counted samples): Mean's factor for the backward kernels.
template <typename T>
__global__ void __launch_bounds__(kSingleBlockThreads) inverse_count_kernel(NllLayout l, T* scale) {
  const long long count = block_count(l);
  if (threadIdx.x == 0) scale[0] = T(1) / static_cast<T>(count);
}

// Mean's factor on the device (one small launch), or nullptr for a unit factor.
template <typename T>
Tensor mean_scale(const NllLayout& l, Reduction reduction, const Tensor& like) {
  if (reduction != Reduction::Mean) return Tensor();
  Tensor scale = empty({1}, {.dtype = like.dtype(), .device = like.device()});
  inverse_count_kernel<<<1, kSingleBlockThreads, 0, current_stream()>>>(l, scale.data_ptr<T>());
  TG_CUDA_CHECK_LAUNCH();
  return scale;
}

template <typename T>
__global__ void nll_backward_kernel(const T* grad, int64_t grad_stride, const T* scale_ptr, NllLayout l, T* out) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= l.rows * l.classes) return;
  const int64_t n = i / l.classes;
  const int64_t c = i - n * l.classes;
  const int64_t t = l.target[n * l.target_stride];
  if (t == l.ignore_index) {
    out[i] = T(0);
  } else if (t < 0 || t >= l.classes) {
    if (c == 0) report_device_error(l.error, DeviceErrorOp::NllLossBackward, t, l.classes, 0, n);
    out[i] = std::numeric_limits<T>::quiet_NaN();
  } else {
    const T scale = scale_ptr ? scale_ptr[0] : T(1);
    out[i] = c == t ? -grad[n * grad_stride] * scale : T(0);
  }
}


// One warp per sample, many blocks: the row's max and log-sum-exp, its log-probabilities written
// out, and (lane 0) its -log p[target] into row_loss[n].
template <typename T>
__global__ void cross_entropy_rows_kernel(const T* x, NllLayout l, T* logp, T* row_loss) {
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int64_t n = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  if (n >= l.rows) return;
  const T* row = x + n * l.row_stride;
  T m = -std::numeric_limits<T>::infinity();
  for (int64_t c = lane; c < l.classes; c += 32) m = max(m, row[c * l.class_stride]);
  m = lanes_max(m);
  T s = 0;
  for (int64_t c = lane; c < l.classes; c += 32) s += exp(row[c * l.class_stride] - m);
  const T lse = m + log(lanes_sum(s));
  T* dst = logp + n * l.classes;
  for (int64_t c = lane; c < l.classes; c += 32) dst[c] = row[c * l.class_stride] - lse;
  if (lane == 0) {
    const int64_t t = l.target[n * l.target_stride];
    if (t == l.ignore_index) {
      row_loss[n] = T(0);
    } else if (t < 0 || t >= l.classes) {
      report_device_error(l.error, DeviceErrorOp::NllLoss, t, l.classes, 0, n);
      row_loss[n] = std::numeric_limits<T>::quiet_NaN();
    } else {
      row_loss[n] = -(row[t * l.class_stride] - lse);
    }
  }
}

// The sum (or mean) of the per-sample losses by one block in a fixed order, so the loss is the same
// on every run.
// Mean divides by the number of counted samples (ignored ones wrote 0).
template <typename T>
__global__ void __launch_bounds__(kSingleBlockThreads) sum_rows_kernel(const T* row_loss, NllLayout l, T* out, bool mean) {
  using BlockReduce = cub::BlockReduce<T, kSingleBlockThreads>;
  __shared__ typename BlockReduce::TempStorage temp;
  T local = 0;
  for (int64_t n = threadIdx.x; n < l.rows; n += kSingleBlockThreads) local += row_loss[n];
  const T total = BlockReduce(temp).Sum(local);
  const long long count = mean ? block_count(l) : 1;
  if (threadIdx.x == 0) out[0] = mean ? total / static_cast<T>(count) : total;
}

template <typename T>
__global__ void cross_entropy_backward_kernel(const T* grad, int64_t grad_stride, const T* scale_ptr, const T* logp,
                                              NllLayout l, T* out) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= l.rows * l.classes) return;
  const int64_t n = i / l.classes;
  const int64_t c = i - n * l.classes;
  const int64_t t = l.target[n * l.target_stride];
  if (t == l.ignore_index) {
    out[i] = T(0);
  } else if (t < 0 || t >= l.classes) {
    if (c == 0) report_device_error(l.error, DeviceErrorOp::NllLossBackward, t, l.classes, 0, n);
    out[i] = std::numeric_limits<T>::quiet_NaN();
  } else {
    const T scale = scale_ptr ? scale_ptr[0] : T(1);
    out[i] = (exp(logp[i]) - (c == t ? T(1) : T(0))) * grad[n * grad_stride] * scale;
  }
}

}  // namespace

void cross_entropy_forward(const Tensor& input, const Tensor& target, Reduction reduction, int64_t ignore_index,
                           Tensor& loss, Tensor& log_probs) {
  const NllLayout l = nll_layout(input, target, ignore_index);
  if (reduction == Reduction::None || l.rows > 65536) {
    softmax_rows(SoftmaxMode::LogSoftmax, input, Tensor(), input.dim() - 1, log_probs);
    nll_loss_forward(log_probs, target, reduction, ignore_index, loss);
    return;
  }
  // Rows in parallel (a single block was latency-bound: 160 us for 256 x 1024 on an H100), then one
  // block sums the per-row losses.
  const Tensor row_loss = empty({l.rows}, {.dtype = input.dtype(), .device = input.device()});
  constexpr int kRowsPerBlock = 8;
  TG_DISPATCH_FLOAT_DOUBLE(input.dtype(), "cross_entropy", [&] {
    cross_entropy_rows_kernel<<<blocks_for(l.rows, kRowsPerBlock), kRowsPerBlock * 32, 0, current_stream()>>>(
        input.data_ptr<scalar_t>(), l, log_probs.data_ptr<scalar_t>(), row_loss.data_ptr<scalar_t>());
    TG_CUDA_CHECK_LAUNCH();
    sum_rows_kernel<<<1, kSingleBlockThreads, 0, current_stream()>>>(row_loss.data_ptr<scalar_t>(), l,
                                                                     loss.data_ptr<scalar_t>(),
                                                                     reduction == Reduction::Mean);
    TG_CUDA_CHECK_LAUNCH();
  });
}

void cross_entropy_backward(const Tensor& grad, const Tensor& log_probs, const Tensor& target, Reduction reduction,
                            int64_t ignore_index, Tensor& out) {
  const NllLayout l = nll_layout(out, target, ignore_index);
  const int64_t grad_stride = reduction == Reduction::None && grad.dim() == 1 ? grad.strides()[0] : 0;
  TG_DISPATCH_FLOAT_DOUBLE(grad.dtype(), "cross_entropy_backward", [&] {
    const Tensor scale = mean_scale<scalar_t>(l, reduction, grad);
    cross_entropy_backward_kernel<<<blocks_for(l.rows * l.classes, 256), 256, 0, current_stream()>>>(
        grad.data_ptr<scalar_t>(), grad_stride, scale.defined() ? scale.data_ptr<scalar_t>() : nullptr,
        log_probs.data_ptr<scalar_t>(), l, out.data_ptr<scalar_t>());
    TG_CUDA_CHECK_LAUNCH();
  });
}

void nll_loss_forward(const Tensor& input, const Tensor& target, Reduction reduction, int64_t ignore_index,
                      Tensor& out) {
  const NllLayout l = nll_layout(input, target, ignore_index);
  cudaStream_t stream = current_stream();
  TG_DISPATCH_FLOAT_DOUBLE(input.dtype(), "nll_loss", [&] {
    const scalar_t* x = input.data_ptr<scalar_t>();
    scalar_t* dst = out.data_ptr<scalar_t>();
    if (reduction == Reduction::None) {
      nll_none_kernel<<<blocks_for(l.rows, 256), 256, 0, stream>>>(x, l, dst);
      TG_CUDA_CHECK_LAUNCH();
      return;
    }
    const bool mean = reduction == Reduction::Mean;
    if (l.rows <= 65536) {
      nll_reduce_kernel<<<1, kSingleBlockThreads, 0, stream>>>(x, l, dst, mean);
      TG_CUDA_CHECK_LAUNCH();
      return;
    }
    // Per-sample terms in parallel, then one block sums them (and counts for Mean).
    const Tensor terms = empty({l.rows}, {.dtype = input.dtype(), .device = input.device()});
    nll_none_kernel<<<blocks_for(l.rows, 256), 256, 0, stream>>>(x, l, terms.data_ptr<scalar_t>());
    TG_CUDA_CHECK_LAUNCH();
    sum_rows_kernel<<<1, kSingleBlockThreads, 0, stream>>>(terms.data_ptr<scalar_t>(), l, dst, mean);
    TG_CUDA_CHECK_LAUNCH();
  });
}

void nll_loss_backward(const Tensor& grad, const Tensor& target, Reduction reduction, int64_t ignore_index,
                       Tensor& out) {
  const NllLayout l = nll_layout(out, target, ignore_index);
  const int64_t grad_stride = reduction == Reduction::None && grad.dim() == 1 ? grad.strides()[0] : 0;
  TG_DISPATCH_FLOAT_DOUBLE(grad.dtype(), "nll_loss_backward", [&] {
    const Tensor scale = mean_scale<scalar_t>(l, reduction, grad);
    nll_backward_kernel<<<blocks_for(l.rows * l.classes, 256), 256, 0, current_stream()>>>(
        grad.data_ptr<scalar_t>(), grad_stride, scale.defined() ? scale.data_ptr<scalar_t>() : nullptr, l,
        out.data_ptr<scalar_t>());
    TG_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace tg::cuda
