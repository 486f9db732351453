// CUDA kernels of linear_cross_entropy's per-row steps. The forward reads each row of logits once
// (a running maximum rescales the running sum), so a 50k-class row costs one pass, not two.
#include "ops/loss/cuda/linear_cross_entropy.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "tensor/cuda/cuda_check.h"
#include "tensor/cuda/device_error.h"
#include "tensor/half.h"

namespace tg::cuda {
namespace {

constexpr int kRowThreads = 256;

// Merges the partial log-sum-exp (m2, s2) (max, sum of exp(x - max)) into (m, s); an empty part
// has m = -inf. NaN propagates.
template <typename A>
__device__ __forceinline__ void merge_lse(A& m, A& s, A m2, A s2) {
  constexpr A kNegInf = -std::numeric_limits<A>::infinity();
  if (m2 == kNegInf) return;
  if (m == kNegInf) {
    m = m2;
    s = s2;
  } else if (m2 > m) {
    s = s * exp(m - m2) + s2;
    m = m2;
  } else {
    s += s2 * exp(m2 - m);
  }
}

// One block per row: lse[r] and loss[r] = lse[r] - logits[r, t] (0 for an ignored row, NaN and a
// reported error for a target out of range).
template <typename T, typename A>
__global__ void __launch_bounds__(kRowThreads)
    lse_rows_kernel(const T* __restrict__ logits, int64_t classes, const int64_t* __restrict__ target,
                    int64_t target_stride, int64_t ignore_index, int64_t first_row, A* __restrict__ lse,
                    A* __restrict__ loss, DeviceErrorRecord* error) {
  const int64_t r = blockIdx.x;
  const T* row = logits + r * classes;
  A m = -std::numeric_limits<A>::infinity(), s = 0;
  for (int64_t c = threadIdx.x; c < classes; c += kRowThreads) merge_lse(m, s, static_cast<A>(row[c]), A(1));
  for (int o = 16; o > 0; o /= 2) {
    const A m2 = __shfl_xor_sync(0xffffffffu, m, o);
    const A s2 = __shfl_xor_sync(0xffffffffu, s, o);
    merge_lse(m, s, m2, s2);
  }
  __shared__ A ms[kRowThreads / 32], ss[kRowThreads / 32];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) {
    ms[warp] = m;
    ss[warp] = s;
  }
  __syncthreads();
  if (threadIdx.x != 0) return;
  for (int w = 1; w < kRowThreads / 32; ++w) merge_lse(m, s, ms[w], ss[w]);
  const A l = m + log(s);
  lse[r] = l;
  const int64_t t = target[r * target_stride];
  if (t == ignore_index) {
    loss[r] = A(0);
  } else if (t < 0 || t >= classes) {
    report_device_error(error, DeviceErrorOp::LinearCrossEntropy, t, classes, 0, first_row + r);
    loss[r] = std::numeric_limits<A>::quiet_NaN();
  } else {
    loss[r] = l - static_cast<A>(row[t]);
  }
}

// logits[r, c] = (exp(logits[r, c] - lse[r]) - (c == t)) * grad[r], 0 on ignored rows. Rows along
// the grid's y, columns along x (no 64-bit division per element).
template <typename T, typename A>
__global__ void softmax_grad_kernel(T* __restrict__ logits, int64_t rows, int64_t classes, const A* __restrict__ lse,
                                    const int64_t* __restrict__ target, int64_t target_stride, int64_t ignore_index,
                                    const A* __restrict__ grad, int64_t grad_stride, int64_t first_row,
                                    DeviceErrorRecord* error) {
  const int64_t c0 = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    T* row = logits + r * classes;
    const int64_t t = target[r * target_stride];
    if (t == ignore_index) {
      for (int64_t c = c0; c < classes; c += step) row[c] = static_cast<T>(A(0));
    } else if (t < 0 || t >= classes) {
      if (c0 == 0) report_device_error(error, DeviceErrorOp::LinearCrossEntropyBackward, t, classes, 0, first_row + r);
      for (int64_t c = c0; c < classes; c += step) row[c] = static_cast<T>(std::numeric_limits<A>::quiet_NaN());
    } else {
      const A l = lse[r], g = grad[r * grad_stride];
      for (int64_t c = c0; c < classes; c += step) {
        const A p = exp(static_cast<A>(row[c]) - l);
        row[c] = static_cast<T>((p - (c == t ? A(1) : A(0))) * g);
      }
    }
  }
}

}  // namespace

void linear_cross_entropy_rows_forward(const Tensor& logits, const Tensor& target, int64_t ignore_index,
                                       int64_t first_row, const Tensor& lse, const Tensor& loss) {
  const int64_t rows = logits.size(0), classes = logits.size(1);
  if (rows == 0 || classes == 0) return;
  DeviceErrorRecord* error = device_error_record(logits.device().index);
  TG_DISPATCH_FLOATING(logits.dtype(), "linear_cross_entropy", [&] {
    using A = acc_type<scalar_t>;
    lse_rows_kernel<scalar_t, A><<<static_cast<unsigned>(rows), kRowThreads, 0, current_stream()>>>(
        logits.data_ptr<scalar_t>(), classes, target.data_ptr<int64_t>(), target.stride(0), ignore_index, first_row,
        lse.data_ptr<A>(), loss.data_ptr<A>(), error);
  });
  TG_CUDA_CHECK_LAUNCH();
}

void linear_cross_entropy_rows_backward(const Tensor& logits, const Tensor& lse, const Tensor& target,
                                        int64_t ignore_index, int64_t first_row, const Tensor& row_grad) {
  const int64_t rows = logits.size(0), classes = logits.size(1);
  if (rows == 0 || classes == 0) return;
  DeviceErrorRecord* error = device_error_record(logits.device().index);
  const int64_t grad_stride = row_grad.numel() == 1 ? 0 : 1;
  constexpr int kThreads = 256;
  const dim3 blocks(static_cast<unsigned>(std::min<int64_t>((classes + kThreads - 1) / kThreads, 1024)),
                    static_cast<unsigned>(std::min<int64_t>(rows, 65535)));
  TG_DISPATCH_FLOATING(logits.dtype(), "linear_cross_entropy_backward", [&] {
    using A = acc_type<scalar_t>;
    softmax_grad_kernel<scalar_t, A><<<blocks, kThreads, 0, current_stream()>>>(
        logits.data_ptr<scalar_t>(), rows, classes, lse.data_ptr<A>(), target.data_ptr<int64_t>(), target.stride(0),
        ignore_index, row_grad.data_ptr<A>(), grad_stride, first_row, error);
  });
  TG_CUDA_CHECK_LAUNCH();
}

}  // namespace tg::cuda
