// Matrix products: tapegraph's mm and linear against the libraries they call, used directly on the
// same sizes (cublasSgemm on the GPU, Eigen on the CPU), so the gap is tapegraph's own overhead.
// Sizes are n x k x m ([n, k] @ [k, m]): the MLP anchor layers (64x128x256, 256x1024x4096) and 4096^3.
// Each GPU iteration ends with a synchronize, so real time covers the whole product.
#include <benchmark/benchmark.h>

#include <Eigen/Core>

#include "tapegraph.h"
#include "tensor/cuda_runtime.h"

#ifdef TG_WITH_CUDA
#include <cublas_v2.h>
#include <cuda_runtime.h>
#endif

namespace {

double flops(int64_t n, int64_t k, int64_t m) {
  return 2.0 * static_cast<double>(n) * static_cast<double>(k) * static_cast<double>(m);
}

void set_gflops(benchmark::State& state, int64_t n, int64_t k, int64_t m) {
  state.counters["GFLOP/s"] =
      benchmark::Counter(flops(n, k, m) * static_cast<double>(state.iterations()) / 1e9, benchmark::Counter::kIsRate);
}

bool skip_without_gpu(benchmark::State& state) {
  if (tg::cuda_is_available()) return false;
  state.SkipWithError("no CUDA device");
  return true;
}

// tapegraph mm (float32, TF32 off), result allocated each time by the caching allocator.
void BM_tg_mm_cuda(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  const int64_t n = state.range(0), k = state.range(1), m = state.range(2);
  const tg::Tensor a = tg::randn({n, k}, {.device = tg::cuda_device(0)});
  const tg::Tensor b = tg::randn({k, m}, {.device = tg::cuda_device(0)});
  tg::Tensor c = tg::mm(a, b);
  tg::cuda::synchronize();
  for (auto _ : state) {
    c = tg::Tensor();
    c = tg::mm(a, b);
    tg::cuda::synchronize();
  }
  set_gflops(state, n, k, m);
}

// tapegraph linear (x @ w^T + b, the MLP layer): bias fill plus one cuBLAS call.
void BM_tg_linear_cuda(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  const int64_t n = state.range(0), k = state.range(1), m = state.range(2);
  const tg::Tensor x = tg::randn({n, k}, {.device = tg::cuda_device(0)});
  const tg::Tensor w = tg::randn({m, k}, {.device = tg::cuda_device(0)});
  const tg::Tensor bias = tg::randn({m}, {.device = tg::cuda_device(0)});
  tg::Tensor y = tg::linear(x, w, bias);
  tg::cuda::synchronize();
  for (auto _ : state) {
    y = tg::Tensor();
    y = tg::linear(x, w, bias);
    tg::cuda::synchronize();
  }
  set_gflops(state, n, k, m);
}

#ifdef TG_WITH_CUDA
// cublasSgemm on raw buffers with the default math mode: the floor tapegraph's mm can reach.
void BM_cublas_sgemm(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  const int64_t n = state.range(0), k = state.range(1), m = state.range(2);
  float *a = nullptr, *b = nullptr, *c = nullptr;
  cudaMalloc(&a, sizeof(float) * static_cast<size_t>(n * k));
  cudaMalloc(&b, sizeof(float) * static_cast<size_t>(k * m));
  cudaMalloc(&c, sizeof(float) * static_cast<size_t>(n * m));
  cudaMemset(a, 0, sizeof(float) * static_cast<size_t>(n * k));
  cudaMemset(b, 0, sizeof(float) * static_cast<size_t>(k * m));
  cublasHandle_t handle = nullptr;
  if (cublasCreate(&handle) != CUBLAS_STATUS_SUCCESS) {
    state.SkipWithError("cublasCreate failed");
    return;
  }
  cublasSetMathMode(handle, CUBLAS_DEFAULT_MATH);
  const float alpha = 1.0f, beta = 0.0f;
  // Row-major [n, m] = [n, k] @ [k, m] as column-major [m, n] = [m, k] @ [k, n].
  auto run = [&] {
    cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k),
                &alpha, b, static_cast<int>(m), a, static_cast<int>(k), &beta, c, static_cast<int>(m));
  };
  run();
  cudaDeviceSynchronize();
  for (auto _ : state) {
    run();
    cudaDeviceSynchronize();
  }
  set_gflops(state, n, k, m);
  cublasDestroy(handle);
  cudaFree(a);
  cudaFree(b);
  cudaFree(c);
}
#endif

// tapegraph mm on the CPU (Eigen underneath, one thread).
void BM_tg_mm_cpu(benchmark::State& state) {
  const int64_t n = state.range(0), k = state.range(1), m = state.range(2);
  const tg::Tensor a = tg::randn({n, k});
  const tg::Tensor b = tg::randn({k, m});
  tg::Tensor c;
  for (auto _ : state) {
    c = tg::Tensor();
    c = tg::mm(a, b);
    benchmark::DoNotOptimize(c.raw_data());
  }
  set_gflops(state, n, k, m);
}

// Eigen's product on preallocated row-major matrices: the CPU floor.
void BM_eigen_gemm(benchmark::State& state) {
  using Mat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  const int64_t n = state.range(0), k = state.range(1), m = state.range(2);
  const Mat a = Mat::Random(n, k);
  const Mat b = Mat::Random(k, m);
  Mat c(n, m);
  for (auto _ : state) {
    c.noalias() = a * b;
    benchmark::DoNotOptimize(c.data());
  }
  set_gflops(state, n, k, m);
}

void gpu_sizes(benchmark::internal::Benchmark* b) {
  b->Args({64, 128, 256})->Args({256, 1024, 4096})->Args({4096, 4096, 4096});
  b->UseRealTime()->Unit(benchmark::kMicrosecond);
}

void cpu_sizes(benchmark::internal::Benchmark* b) {
  b->Args({64, 128, 256})->Args({64, 256, 10})->Args({256, 256, 256});
  b->UseRealTime()->Unit(benchmark::kMicrosecond);
}

BENCHMARK(BM_tg_mm_cuda)->Apply(gpu_sizes);
#ifdef TG_WITH_CUDA
BENCHMARK(BM_cublas_sgemm)->Apply(gpu_sizes);
#endif
BENCHMARK(BM_tg_linear_cuda)->Apply(gpu_sizes);
BENCHMARK(BM_tg_mm_cpu)->Apply(cpu_sizes);
BENCHMARK(BM_eigen_gemm)->Apply(cpu_sizes);

}  // namespace

BENCHMARK_MAIN();
