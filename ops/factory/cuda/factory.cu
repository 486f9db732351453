// arange on the device: one thread per element, the same arithmetic as the CPU loop.
#include "ops/factory/cuda/factory.h"
#include "tensor/cuda/cuda_check.h"

namespace tg {
namespace {

constexpr int kThreads = 256;

template <typename T>
__global__ void arange_kernel(T* out, int64_t n, double start, double step, bool exact, int64_t istart,
                              int64_t istep) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  // Unfused like the host so float steps give the same values on both devices.
  out[i] = exact ? static_cast<T>(istart + i * istep) : static_cast<T>(__dadd_rn(start, __dmul_rn(i, step)));
}

}  // namespace

void arange_cuda(void* out, DType dtype, int64_t n, double start, double step, bool exact, int64_t istart,
                 int64_t istep) {
  if (n == 0) return;
  TG_DISPATCH_NUMERIC(dtype, "arange", [&] {
    arange_kernel<scalar_t><<<cuda::blocks_for(n, kThreads), kThreads, 0, cuda::current_stream()>>>(
        static_cast<scalar_t*>(out), n, start, step, exact, istart, istep);
    TG_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace tg
