// Products with a bias vector fused into cuBLASLt's epilogue (linear and addmm with a [m] bias):
// one kernel, where the plain path needs a bias fill and an accumulating gemm. Descriptions and
// the chosen algorithm are cached per shape, since cuBLASLt's heuristic query costs more than a
// small product.
#include <cublasLt.h>

#include <cstdint>
#include <functional>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "ops/cuda/blas.h"
#include "ops/cuda/cublas_check.h"
#include "tensor/cuda/cuda_check.h"
#include "tensor/cuda/device_guard.h"

namespace tg::cuda {
namespace {

// Everything the algorithm choice depends on.
struct PlanKey {
  int device;
  DType dtype;
  bool trans_a, trans_b;
  int64_t m, n, k, lda, ldb, ldc;
  int align_a, align_b, align_c;
  bool operator==(const PlanKey&) const = default;
};

struct PlanKeyHash {
  size_t operator()(const PlanKey& k) const {
    size_t h = std::hash<int64_t>()(k.m);
    for (int64_t v : {k.n, k.k, k.lda, k.ldb, k.ldc, int64_t(k.device), int64_t(k.dtype), int64_t(k.trans_a),
                      int64_t(k.trans_b), int64_t(k.align_a), int64_t(k.align_b), int64_t(k.align_c)})
      h = h * 1000003u ^ std::hash<int64_t>()(v);
    return h;
  }
};

// A matmul description with its layouts and chosen algorithm; ok is false when cuBLASLt has none.
struct Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
  bool ok = false;
};

constexpr size_t kMaxPlans = 4096;  // shapes seen by a training loop are few; this bounds a sweep

std::mutex g_mutex;
std::vector<cublasLtHandle_t> g_handles;  // by device index
std::unordered_map<PlanKey, Plan, PlanKeyHash> g_plans;

cublasLtHandle_t handle_locked(int device) {
  if (g_handles.size() <= static_cast<size_t>(device)) g_handles.resize(static_cast<size_t>(device) + 1, nullptr);
  cublasLtHandle_t& h = g_handles[static_cast<size_t>(device)];
  if (h == nullptr) TG_CUBLAS_CHECK(cublasLtCreate(&h));
  return h;
}

// The largest power of two up to 256 dividing the address (what cuBLASLt's kernels may assume).
int alignment(const void* p) {
  const auto v = reinterpret_cast<uintptr_t>(p);
  int a = 256;
  while (a > 1 && v % static_cast<uintptr_t>(a) != 0) a /= 2;
  return a;
}

void destroy(Plan& p) {
  if (p.a) cublasLtMatrixLayoutDestroy(p.a);
  if (p.b) cublasLtMatrixLayoutDestroy(p.b);
  if (p.c) cublasLtMatrixLayoutDestroy(p.c);
  if (p.desc) cublasLtMatmulDescDestroy(p.desc);
  p = Plan{};
}

template <typename T>
void set_attr(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t attr, const T& v) {
  TG_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(d, attr, &v, sizeof(v)));
}

// Column-major view of the row-major product (see gemm in blas.cpp): D[m, n] = op(b) @ op(a), with
// cuBLASLt's first operand our b and its second our a; the bias runs along D's m rows.
Plan make_plan(cublasLtHandle_t lt, const PlanKey& key, size_t workspace_bytes) {
  Plan p;
  const cudaDataType_t type = key.dtype == kFloat32 ? CUDA_R_32F : CUDA_R_64F;
  const cublasComputeType_t compute = key.dtype == kFloat32 ? CUBLAS_COMPUTE_32F : CUBLAS_COMPUTE_64F;
  TG_CUBLAS_CHECK(cublasLtMatmulDescCreate(&p.desc, compute, type));
  const cublasOperation_t op_first = key.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_second = key.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  set_attr(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, op_first);
  set_attr(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, op_second);
  set_attr(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, CUBLASLT_EPILOGUE_BIAS);
  const auto m = static_cast<uint64_t>(key.m), n = static_cast<uint64_t>(key.n), k = static_cast<uint64_t>(key.k);
  TG_CUBLAS_CHECK(key.trans_b ? cublasLtMatrixLayoutCreate(&p.a, type, k, m, key.ldb)
                              : cublasLtMatrixLayoutCreate(&p.a, type, m, k, key.ldb));
  TG_CUBLAS_CHECK(key.trans_a ? cublasLtMatrixLayoutCreate(&p.b, type, n, k, key.lda)
                              : cublasLtMatrixLayoutCreate(&p.b, type, k, n, key.lda));
  TG_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.c, type, m, n, key.ldc));

  cublasLtMatmulPreference_t pref = nullptr;
  TG_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  auto set_pref = [&](cublasLtMatmulPreferenceAttributes_t attr, auto v) {
    TG_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, attr, &v, sizeof(v)));
  };
  set_pref(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, static_cast<uint64_t>(workspace_bytes));
  set_pref(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, static_cast<uint32_t>(key.align_b));
  set_pref(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, static_cast<uint32_t>(key.align_a));
  set_pref(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, static_cast<uint32_t>(key.align_c));
  set_pref(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, static_cast<uint32_t>(key.align_c));
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t st =
      cublasLtMatmulAlgoGetHeuristic(lt, p.desc, p.a, p.b, p.c, p.c, pref, 1, &result, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  if (st == CUBLAS_STATUS_SUCCESS && found > 0 && result.state == CUBLAS_STATUS_SUCCESS) {
    p.algo = result.algo;
    p.ok = true;
  }
  return p;
}

template <typename T>
cublasStatus_t run(cublasLtHandle_t lt, const Plan& p, const Gemm& g, void* workspace) {
  const T alpha = static_cast<T>(g.alpha), beta = T(0);
  return cublasLtMatmul(lt, p.desc, &alpha, g.b.data, p.a, g.a.data, p.b, &beta, g.out, p.c, g.out, p.c, &p.algo,
                        workspace, static_cast<size_t>(cublas_workspace_bytes()), current_stream());
}

}  // namespace

bool gemm_bias_epilogue(const Gemm& g, const void* bias) {
  if (g.batch != 1 || g.beta != 0.0 || (g.dtype != kFloat32 && g.dtype != kFloat64)) return false;
  if (alignment(bias) < 16) return false;  // epilogue kernels load the bias in vectors
  if (g.n == 0 || g.m == 0) return true;
  const int device = g.device.index;
  DeviceGuard guard(device);
  void* workspace = cublas_workspace(device);
  std::lock_guard<std::mutex> lock(g_mutex);
  cublasLtHandle_t lt = handle_locked(device);
  const PlanKey key{device, g.dtype, g.a.trans, g.b.trans, g.m, g.n, g.k, g.a.ld, g.b.ld, g.ldc,
                    alignment(g.a.data), alignment(g.b.data), alignment(g.out)};
  auto it = g_plans.find(key);
  if (it == g_plans.end()) {
    if (g_plans.size() >= kMaxPlans) {
      for (auto& [k, plan] : g_plans) destroy(plan);
      g_plans.clear();
    }
    it = g_plans.emplace(key, make_plan(lt, key, static_cast<size_t>(cublas_workspace_bytes()))).first;
  }
  Plan& plan = it->second;
  if (!plan.ok) return false;
  set_attr(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias);
  const cublasStatus_t st =
      g.dtype == kFloat32 ? run<float>(lt, plan, g, workspace) : run<double>(lt, plan, g, workspace);
  if (st == CUBLAS_STATUS_NOT_SUPPORTED) {
    plan.ok = false;  // checked before anything was queued: the caller's plain path takes over
    return false;
  }
  TG_CUBLAS_CHECK(st);
  return true;
}

}  // namespace tg::cuda
