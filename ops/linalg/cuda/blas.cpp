#include "ops/linalg/cuda/blas.h"

#include <cublas_v2.h>

#include <climits>
#include <memory>
#include <mutex>
#include <vector>

#include "ops/core/precision.h"
#include "ops/linalg/cuda/cublas_check.h"
#include "tensor/cuda/caching_allocator.h"
#include "tensor/cuda/cuda_check.h"
#include "tensor/cuda/device_guard.h"
#include "tensor/cuda/forked_work.h"

namespace tg::cuda {
namespace {

// cuBLAS's recommended workspace for Hopper; the default pool owns it for the process lifetime.
constexpr int64_t kWorkspaceBytes = int64_t{32} << 20;

struct HandleSlot {
  cublasHandle_t handle = nullptr;
  void* workspace = nullptr;
  cudaStream_t stream = nullptr;
  bool bound = false;
};

std::mutex g_mutex;
// By device index: the slot of the branch stream and that of every other stream.
struct DeviceSlots {
  std::unique_ptr<HandleSlot> main, branch;
};
std::vector<DeviceSlots> g_slots;

// The handle of `device` for the current stream, created on first use and (re)bound to the stream.
// cublasSetStream resets the workspace to cuBLAS's internal one, so ours is set again after every
// stream change; cuBLAS then never allocates during a graph capture.
HandleSlot& slot_locked(int device) {
  TG_CHECK(device >= 0, "[cublas] invalid device index ", device);
  if (g_slots.size() <= static_cast<size_t>(device)) g_slots.resize(static_cast<size_t>(device) + 1);
  const cudaStream_t stream = current_stream();
  DeviceSlots& slots = g_slots[static_cast<size_t>(device)];
  auto& entry = is_branch_stream(stream) ? slots.branch : slots.main;
  if (!entry) entry = std::make_unique<HandleSlot>();
  HandleSlot& s = *entry;
  if (s.handle == nullptr) {
    DeviceGuard guard(device);
    TG_CUBLAS_CHECK(cublasCreate(&s.handle));
    // Default math: float32 products in full precision (TF32 off), as PyTorch's default.
    TG_CUBLAS_CHECK(cublasSetMathMode(s.handle, CUBLAS_DEFAULT_MATH));
    s.workspace = CachingAllocator::get().allocate_on(device, static_cast<size_t>(kWorkspaceBytes), kDefaultMempool);
  }
  if (!s.bound || s.stream != stream) {
    TG_CUBLAS_CHECK(cublasSetStream(s.handle, stream));
    TG_CUBLAS_CHECK(cublasSetWorkspace(s.handle, s.workspace, static_cast<size_t>(kWorkspaceBytes)));
    s.stream = stream;
    s.bound = true;
  }
  return s;
}

int as_int(int64_t v, const char* what) {
  TG_CHECK(v >= 0 && v <= INT_MAX, "[mm] ", what, " = ", v, " exceeds the 32-bit range cuBLAS accepts");
  return static_cast<int>(v);
}

cublasOperation_t op_of(const GemmOperand& o) { return o.trans ? CUBLAS_OP_T : CUBLAS_OP_N; }

cublasStatus_t gemm_call(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                         const float* alpha, const float* a, int lda, const float* b, int ldb, const float* beta,
                         float* c, int ldc) {
  return cublasSgemm(h, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
cublasStatus_t gemm_call(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                         const double* alpha, const double* a, int lda, const double* b, int ldb,
                         const double* beta, double* c, int ldc) {
  return cublasDgemm(h, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
cublasStatus_t gemm_batched_call(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                                 const float* alpha, const float* a, int lda, long long sa, const float* b, int ldb,
                                 long long sb, const float* beta, float* c, int ldc, long long sc, int batch) {
  return cublasSgemmStridedBatched(h, ta, tb, m, n, k, alpha, a, lda, sa, b, ldb, sb, beta, c, ldc, sc, batch);
}
cublasStatus_t gemm_batched_call(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                                 const double* alpha, const double* a, int lda, long long sa, const double* b,
                                 int ldb, long long sb, const double* beta, double* c, int ldc, long long sc,
                                 int batch) {
  return cublasDgemmStridedBatched(h, ta, tb, m, n, k, alpha, a, lda, sa, b, ldb, sb, beta, c, ldc, sc, batch);
}

// Row-major out[n, m] = a[n, k] @ b[k, m] is column-major out^T[m, n] = b^T[m, k] @ a^T[k, n]:
// cuBLAS gets b first and a second, each read untransposed when stored row-major.
template <typename T>
void typed_gemm(cublasHandle_t h, const Gemm& g) {
  const int m = as_int(g.m, "m"), n = as_int(g.n, "n"), k = as_int(g.k, "k");
  const int lda = as_int(g.a.ld, "lda"), ldb = as_int(g.b.ld, "ldb"), ldc = as_int(g.ldc, "ldc");
  const T alpha = static_cast<T>(g.alpha), beta = static_cast<T>(g.beta);
  const T* a = static_cast<const T*>(g.a.data);
  const T* b = static_cast<const T*>(g.b.data);
  T* c = static_cast<T*>(g.out);
  if (g.batch == 1) {
    TG_CUBLAS_CHECK(gemm_call(h, op_of(g.b), op_of(g.a), m, n, k, &alpha, b, ldb, a, lda, &beta, c, ldc));
    return;
  }
  TG_CUBLAS_CHECK(gemm_batched_call(h, op_of(g.b), op_of(g.a), m, n, k, &alpha, b, ldb, g.b.batch_stride, a, lda,
                                    g.a.batch_stride, &beta, c, ldc, g.out_batch_stride,
                                    as_int(g.batch, "batch")));
}

// 16-bit operands: cuBLAS's mixed-precision product, float32 accumulation and scalars.
void low_precision_gemm(cublasHandle_t h, const Gemm& g) {
  const int m = as_int(g.m, "m"), n = as_int(g.n, "n"), k = as_int(g.k, "k");
  const int lda = as_int(g.a.ld, "lda"), ldb = as_int(g.b.ld, "ldb"), ldc = as_int(g.ldc, "ldc");
  const float alpha = static_cast<float>(g.alpha), beta = static_cast<float>(g.beta);
  const cudaDataType_t type = cuda_data_type(g.dtype);
  const cudaDataType_t out_type = g.float32_out ? CUDA_R_32F : type;
  TG_CUBLAS_CHECK(cublasGemmStridedBatchedEx(h, op_of(g.b), op_of(g.a), m, n, k, &alpha, g.b.data, type, ldb,
                                             g.b.batch_stride, g.a.data, type, lda, g.a.batch_stride, &beta, g.out,
                                             out_type, ldc, g.out_batch_stride, as_int(g.batch, "batch"),
                                             CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

}  // namespace

cudaDataType_t cuda_data_type(DType dtype) {
  switch (dtype) {
    case DType::Float16: return CUDA_R_16F;
    case DType::BFloat16: return CUDA_R_16BF;
    case DType::Float32: return CUDA_R_32F;
    case DType::Float64: return CUDA_R_64F;
    default: TG_FAIL("[mm] expected a floating dtype, got ", dtype_name(dtype));
  }
}

cublasHandle_t cublas_handle(int device) {
  std::lock_guard<std::mutex> lock(g_mutex);
  return slot_locked(device).handle;
}

void prepare_cublas_handles(int device) {
  DeviceGuard guard(device);
  std::lock_guard<std::mutex> lock(g_mutex);
  (void)slot_locked(device);
  StreamGuard on_branch(branch_stream());
  (void)slot_locked(device);
}

int64_t cublas_workspace_bytes() { return kWorkspaceBytes; }

void* cublas_workspace(int device) {
  std::lock_guard<std::mutex> lock(g_mutex);
  return slot_locked(device).workspace;
}

void gemm(const Gemm& g) {
  if (g.batch == 0 || g.n == 0 || g.m == 0) return;
  DeviceGuard guard(g.device.index);
  std::lock_guard<std::mutex> lock(g_mutex);
  cublasHandle_t h = slot_locked(g.device.index).handle;
  switch (g.dtype) {
    case DType::Float32: {
      TG_CUBLAS_CHECK(cublasSetMathMode(h, allow_tf32() ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
      return typed_gemm<float>(h, g);
    }
    case DType::Float64: return typed_gemm<double>(h, g);
    case DType::Float16:
    case DType::BFloat16: return low_precision_gemm(h, g);
    default: TG_FAIL("[mm] expected a floating dtype, got ", dtype_name(g.dtype));
  }
}

}  // namespace tg::cuda
