#include "ops/linalg/cuda/matmul.h"

#include "tensor/cuda/cuda_check.h"
#include "tensor/cuda/device_guard.h"

namespace tg::cuda {
namespace {

constexpr int kThreads = 256;
constexpr unsigned kMaxBlocks = 65535;

// out[i, j] = beta * bias[i*s0 + j*s1] over a contiguous [n, m] output (grid-stride loop).
template <typename T, typename Index>
__global__ void fill_bias_kernel(T* out, Index total, Index m, const T* bias, Index s0, Index s1, acc_type<T> beta) {
  for (Index idx = static_cast<Index>(blockIdx.x) * blockDim.x + threadIdx.x; idx < total;
       idx += static_cast<Index>(blockDim.x) * gridDim.x) {
    const Index i = idx / m;
    const Index j = idx - i * m;
    out[idx] = static_cast<T>(beta * static_cast<acc_type<T>>(bias[i * s0 + j * s1]));
  }
}

template <typename T>
void launch_fill(void* out, int64_t n, int64_t m, const BiasRef& bias, double beta) {
  const int64_t total = n * m;
  const unsigned blocks = std::min(blocks_for(total, kThreads), kMaxBlocks);
  T* o = static_cast<T*>(out);
  const T* b = static_cast<const T*>(bias.data);
  // The largest bias offset read is (n-1)*s0 + (m-1)*s1; 32-bit indices suffice below 2^31.
  const int64_t span = (n - 1) * bias.s0 + (m - 1) * bias.s1;
  if (total < (int64_t{1} << 31) && span < (int64_t{1} << 31)) {
    fill_bias_kernel<T, int32_t><<<blocks, kThreads, 0, current_stream()>>>(
        o, static_cast<int32_t>(total), static_cast<int32_t>(m), b, static_cast<int32_t>(bias.s0),
        static_cast<int32_t>(bias.s1), static_cast<acc_type<T>>(beta));
  } else {
    fill_bias_kernel<T, int64_t><<<blocks, kThreads, 0, current_stream()>>>(o, total, m, b, bias.s0, bias.s1,
                                                                           static_cast<acc_type<T>>(beta));
  }
  TG_CUDA_CHECK_LAUNCH();
}

}  // namespace

void fill_bias(int device, DType dtype, void* out, int64_t n, int64_t m, const BiasRef& bias, double beta) {
  if (n == 0 || m == 0) return;
  DeviceGuard guard(device);
  if (bias.data == nullptr) {
    TG_CUDA_CHECK(cudaMemsetAsync(out, 0, static_cast<size_t>(n * m * dtype_size(dtype)), current_stream()));
    return;
  }
  switch (dtype) {
    case DType::Float32: return launch_fill<float>(out, n, m, bias, beta);
    case DType::Float64: return launch_fill<double>(out, n, m, bias, beta);
    case DType::Float16: return launch_fill<Half>(out, n, m, bias, beta);
    case DType::BFloat16: return launch_fill<BFloat16>(out, n, m, bias, beta);
    default: TG_FAIL("[addmm] expected a floating dtype, got ", dtype_name(dtype));
  }
}

}  // namespace tg::cuda
