// The elementwise kernels around the linear layers' products on CUDA, in one file (they share its
// headers): addmm's bias fill (ops/linalg/cuda/matmul.h), ReLU's output mask
// (ops/linalg/cuda/relu_mask.h), and the fused ReLU and tanh-GELU backwards with their bias
// gradients (ops/linalg/cuda/bias_grad.h).
#include "ops/core/cuda/aligned_vector.cuh"
#include "ops/elementwise/elementwise_math.h"
#include "ops/linalg/cuda/bias_grad.h"
#include "ops/linalg/cuda/matmul.h"
#include "ops/linalg/cuda/relu_mask.h"
#include "ops/reduce/cuda/column_sum.cuh"
#include "tensor/cuda/cuda_check.h"
#include "tensor/cuda/device_guard.h"

namespace tg::cuda {
namespace {

constexpr int kThreads = 256;

}  // namespace

// ---- addmm's bias fill ----------------------------------------------------------------------

namespace {

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

// ---- ReLU's output mask ---------------------------------------------------------------------

namespace {

// One thread per 32-bit word: its 32 elements of one row (a warp reads 1024 consecutive ones).
template <typename T>
__global__ void relu_mask_kernel(const T* __restrict__ y, uint32_t* __restrict__ mask, int64_t rows, int64_t cols,
                                 int64_t words) {
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= rows * words) return;
  const int64_t r = idx / words;
  const int64_t first = (idx - r * words) * 32;
  const T* row = y + r * cols;
  uint32_t word = 0;
  for (int b = 0; b < 32 && first + b < cols; ++b)
    if (row[first + b] > T(0)) word |= 1u << b;
  mask[idx] = word;
}

}  // namespace

void relu_mask(const Tensor& y, const Tensor& mask, int64_t rows, int64_t cols, int64_t words) {
  if (rows * words == 0) return;
  const Tensor yc = y.contiguous();
  auto* bits = static_cast<uint32_t*>(mask.raw_data());
  TG_DISPATCH_FLOATING(yc.dtype(), "relu_mask", [&] {
    relu_mask_kernel<scalar_t><<<blocks_for(rows * words, kThreads), kThreads, 0, current_stream()>>>(
        yc.data_ptr<scalar_t>(), bits, rows, cols, words);
  });
  TG_CUDA_CHECK_LAUNCH();
}

// ---- fused activation backwards with bias gradients -------------------------------------------

namespace {

// h = grad(g, a) elementwise (a: the activation's saved input or output) and the column sums of h as
// rounded to T. VEC > 1: rows of 16-byte aligned vectors, VEC adjacent columns per thread (the same
// rows per column, in the same order, as VEC = 1: the same sums).
template <typename T, int VEC, typename Grad>
__global__ void activation_backward_bias_grad_kernel(const T* __restrict__ g, const T* __restrict__ a,
                                                     T* __restrict__ h, int64_t rows, int64_t cols,
                                                     int64_t chunk_rows, detail::ValueStore<T> db,
                                                     acc_type<T>* partial) {
  using Acc = acc_type<T>;  // 16-bit gradients sum in float
  const Grad grad;
  if constexpr (VEC == 1) {
    sum_block_columns<Acc>(
        rows, cols, chunk_rows,
        [&](int64_t at) {
          const T v = grad(g[at], a[at]);
          h[at] = v;
          return static_cast<Acc>(v);
        },
        db, partial);
  } else {
    using Vec = AlignedVector<T, VEC>;
    sum_block_column_packs<Acc, VEC>(
        rows, cols, chunk_rows,
        [&](int64_t at, Acc(&sums)[VEC]) {
          const Vec gv = *reinterpret_cast<const Vec*>(g + at), av = *reinterpret_cast<const Vec*>(a + at);
          Vec hv;
#pragma unroll
          for (int k = 0; k < VEC; ++k) {
            hv.v[k] = grad(gv.v[k], av.v[k]);
            sums[k] = static_cast<Acc>(hv.v[k]);
          }
          *reinterpret_cast<Vec*>(h + at) = hv;
        },
        db, partial);
  }
}

// Launches activation_backward_bias_grad_kernel over contiguous [rows, cols] g, a, h and db [cols].
template <template <typename> class Grad>
void activation_backward_bias_grad(const char* name, const Tensor& g, const Tensor& a, Tensor& h, Tensor& db) {
  const int64_t cols = db.numel();
  if (cols == 0) return;
  const int64_t rows = g.numel() / cols;
  TG_DISPATCH_FLOATING(g.dtype(), name, [&] {
    using Acc = acc_type<scalar_t>;
    const detail::ValueStore<scalar_t> store{db.data_ptr<scalar_t>(), Acc(1), false};
    constexpr int kVec = std::min<int>(8, static_cast<int>(16 / sizeof(scalar_t)));
    const bool vectors = cols % kVec == 0 && aligned_16(g.raw_data()) && aligned_16(a.raw_data()) &&
                         aligned_16(h.raw_data());
    run_column_sum<Acc>(
        rows, cols, g.device(), store,
        [&](dim3 grid, dim3 block, int64_t chunk_rows, Acc* partial) {
          auto* kernel = vectors ? activation_backward_bias_grad_kernel<scalar_t, kVec, Grad<scalar_t>>
                                 : activation_backward_bias_grad_kernel<scalar_t, 1, Grad<scalar_t>>;
          kernel<<<grid, block, 0, current_stream()>>>(g.data_ptr<scalar_t>(), a.data_ptr<scalar_t>(),
                                                       h.data_ptr<scalar_t>(), rows, cols, chunk_rows, store, partial);
        },
        vectors ? kVec : 1);
  });
}

}  // namespace

void gelu_tanh_backward_bias_grad(const Tensor& g, const Tensor& x, Tensor& h, Tensor& db) {
  // The elementwise kernel's functor: the same bits as gelu_backward.
  activation_backward_bias_grad<ew::GeluTanhBackwardFn>("gelu_backward_bias_grad", g, x, h, db);
}

void relu_backward_bias_grad(const Tensor& g, const Tensor& y, Tensor& h, Tensor& db) {
  // threshold_backward's functor (g where the ReLU's output y > 0): the same bits.
  activation_backward_bias_grad<ew::ThresholdBackwardFn>("relu_backward_bias_grad", g, y, h, db);
}

}  // namespace tg::cuda
