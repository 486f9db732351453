// Single products through cuBLASLt, with a bias vector fused into the epilogue where there is one
// (linear and addmm with a [m] bias: one kernel, where the plain path needs a bias fill and an
// accumulating gemm). Descriptions and the chosen algorithm are cached per shape, since cuBLASLt's
// heuristic query costs more than a small product. The algorithm is chosen by timing: for the small
// products of training steps the heuristic's first choice is often a split-K kernel plus a reduction
// kernel, two launches where one smaller-tiled kernel takes half the time. Each of the heuristic's
// candidates runs on the call's own operands (outside graph capture, once per shape) and the fastest
// is kept; set_gemm_autotuning(false) keeps the heuristic's first choice instead. The choice is kept
// on disk too, so later processes skip the query and the timing (see Note [Warm start]).
#include <cublasLt.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "ops/core/cuda/device_cache_key.h"
#include "ops/core/disk_cache.h"
#include "ops/core/precision.h"
#include "ops/linalg/cuda/blas.h"
#include "ops/linalg/cuda/cublas_check.h"
#include "tensor/cuda/caching_allocator.h"
#include "tensor/cuda/cuda_check.h"
#include "tensor/cuda/device_guard.h"
#include "tensor/half.h"

namespace tg::cuda {
namespace {

// Everything the algorithm choice depends on.
struct PlanKey {
  int device;
  DType dtype;
  bool trans_a, trans_b, bias, tf32;
  LtEpilogue epilogue;
  int64_t m, n, k, lda, ldb, ldc, aux_ld;
  int align_a, align_b, align_c;
  bool operator==(const PlanKey&) const = default;
};

struct PlanKeyHash {
  size_t operator()(const PlanKey& k) const {
    size_t h = std::hash<int64_t>()(k.m);
    for (int64_t v : {k.n, k.k, k.lda, k.ldb, k.ldc, k.aux_ld, int64_t(k.device), int64_t(k.dtype), int64_t(k.trans_a),
                      int64_t(k.trans_b), int64_t(k.bias), int64_t(k.epilogue), int64_t(k.tf32), int64_t(k.align_a),
                      int64_t(k.align_b), int64_t(k.align_c)})
      h = h * 1000003u ^ std::hash<int64_t>()(v);
    return h;
  }
};

// A matmul description with its layouts, the heuristic's candidate algorithms and the chosen one; ok
// is false when cuBLASLt has none.
struct Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  std::vector<cublasLtMatmulAlgo_t> candidates;
  cublasLtMatmulAlgo_t algo{};
  bool ok = false;
  bool tuned = false;     // algo is the fastest candidate (else the heuristic's first)
  std::string disk_key;  // the plan's on-disk cache key
};

constexpr size_t kMaxPlans = 4096;  // shapes seen by a training loop are few; this bounds a sweep
constexpr int kCandidates = 8;      // heuristic results timed per shape
constexpr int kTimedRuns = 5;       // runs per candidate

std::atomic<bool> g_autotune{true};

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

// cuBLASLt's epilogue for ours. In cuBLASLt's column-major view D[m, n] = op(b) @ op(a) (below), so
// our per-column bias and bias gradients run along D's rows, and op(a), whose row sums BGRADB
// takes, is its second operand.
cublasLtEpilogue_t lt_epilogue(LtEpilogue e, bool bias) {
  switch (e) {
    case LtEpilogue::Default: return bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
    case LtEpilogue::Relu: return bias ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_RELU;
    case LtEpilogue::ReluMask: return bias ? CUBLASLT_EPILOGUE_RELU_AUX_BIAS : CUBLASLT_EPILOGUE_RELU_AUX;
    case LtEpilogue::ReluGrad: return CUBLASLT_EPILOGUE_DRELU_BGRAD;
    case LtEpilogue::RowSumsOfA: return CUBLASLT_EPILOGUE_BGRADB;
  }
  return CUBLASLT_EPILOGUE_DEFAULT;
}

bool has_aux(LtEpilogue e) {
  return e == LtEpilogue::ReluMask || e == LtEpilogue::ReluGrad;
}
bool writes_bias_grad(LtEpilogue e) {
  return e == LtEpilogue::ReluGrad || e == LtEpilogue::RowSumsOfA;
}

// Everything the choice depends on, for the on-disk cache: the device, cuBLASLt's version, the key's
// fields but the device index, the workspace and whether candidates are timed.
std::string disk_key(const PlanKey& k, size_t workspace_bytes) {
  std::string s = device_cache_key(k.device) + "\ncublasLt " + std::to_string(cublasLtGetVersion()) + "\nworkspace " +
                  std::to_string(workspace_bytes) + " autotune " + std::to_string(int(g_autotune.load())) + " of " +
                  std::to_string(kCandidates) + "\n" + std::string(dtype_name(k.dtype));
  for (int64_t v : {int64_t(k.trans_a), int64_t(k.trans_b), int64_t(k.bias), int64_t(k.tf32), int64_t(k.epilogue), k.m,
                    k.n, k.k, k.lda, k.ldb, k.ldc, k.aux_ld, int64_t(k.align_a), int64_t(k.align_b), int64_t(k.align_c)})
    s.append(" ").append(std::to_string(v));
  return s;
}

// The algorithm an earlier process chose for p's product, if cuBLASLt still accepts it for p.
bool load_choice(cublasLtHandle_t lt, Plan& p, size_t workspace_bytes) {
  const std::optional<std::string> saved = disk_cache_load("cublaslt", p.disk_key);
  if (!saved) return false;
  cublasLtMatmulAlgo_t algo{};
  cublasLtMatmulHeuristicResult_t check{};
  const char* why = nullptr;
  if (saved->size() != sizeof algo) {
    why = "not an algorithm";
  } else {
    std::memcpy(&algo, saved->data(), sizeof algo);
    if (cublasLtMatmulAlgoCheck(lt, p.desc, p.a, p.b, p.c, p.c, &algo, &check) != CUBLAS_STATUS_SUCCESS)
      why = "cuBLASLt does not accept it for this product";
    else if (check.workspaceSize > workspace_bytes)
      why = "it needs more workspace than there is";
  }
  if (why != nullptr) {
    disk_cache_reject("cublaslt", p.disk_key, why);
    return false;
  }
  p.candidates = {algo};
  p.algo = algo;
  p.ok = p.tuned = true;
  return true;
}

void save_choice(const Plan& p) {
  disk_cache_store("cublaslt", p.disk_key, std::string(reinterpret_cast<const char*>(&p.algo), sizeof p.algo));
}

// Column-major view of the row-major product (see gemm in blas.cpp): D[m, n] = op(b) @ op(a), with
// cuBLASLt's first operand our b and its second our a; the bias runs along D's m rows.
Plan make_plan(cublasLtHandle_t lt, const PlanKey& key, size_t workspace_bytes) {
  Plan p;
  const cudaDataType_t type = cuda_data_type(key.dtype);
  // 16-bit operands multiply on tensor cores and accumulate in float32, as do float32 ones with TF32.
  const cublasComputeType_t compute = key.dtype == kFloat64 ? CUBLAS_COMPUTE_64F
                                      : key.tf32            ? CUBLAS_COMPUTE_32F_FAST_TF32
                                                            : CUBLAS_COMPUTE_32F;
  TG_CUBLAS_CHECK(cublasLtMatmulDescCreate(&p.desc, compute, key.dtype == kFloat64 ? CUDA_R_64F : CUDA_R_32F));
  const cublasOperation_t op_first = key.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_second = key.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  set_attr(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, op_first);
  set_attr(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, op_second);
  set_attr(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, lt_epilogue(key.epilogue, key.bias));
  if (has_aux(key.epilogue)) set_attr(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, key.aux_ld);
  const auto m = static_cast<uint64_t>(key.m), n = static_cast<uint64_t>(key.n), k = static_cast<uint64_t>(key.k);
  TG_CUBLAS_CHECK(key.trans_b ? cublasLtMatrixLayoutCreate(&p.a, type, k, m, key.ldb)
                              : cublasLtMatrixLayoutCreate(&p.a, type, m, k, key.ldb));
  TG_CUBLAS_CHECK(key.trans_a ? cublasLtMatrixLayoutCreate(&p.b, type, n, k, key.lda)
                              : cublasLtMatrixLayoutCreate(&p.b, type, k, n, key.lda));
  TG_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.c, type, m, n, key.ldc));
  p.disk_key = disk_key(key, workspace_bytes);
  if (load_choice(lt, p, workspace_bytes)) return p;

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
  cublasLtMatmulHeuristicResult_t results[kCandidates] = {};
  int found = 0;
  const cublasStatus_t st =
      cublasLtMatmulAlgoGetHeuristic(lt, p.desc, p.a, p.b, p.c, p.c, pref, kCandidates, results, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  if (st == CUBLAS_STATUS_SUCCESS)
    for (int i = 0; i < found; ++i)
      if (results[i].state == CUBLAS_STATUS_SUCCESS) p.candidates.push_back(results[i].algo);
  if (!p.candidates.empty()) {
    p.algo = p.candidates.front();
    p.ok = true;
  }
  return p;
}

template <typename T>
cublasStatus_t run(cublasLtHandle_t lt, const Plan& p, const cublasLtMatmulAlgo_t& algo, const Gemm& g,
                   void* workspace) {
  const T alpha = static_cast<T>(g.alpha), beta = T(0);
  return cublasLtMatmul(lt, p.desc, &alpha, g.b.data, p.a, g.a.data, p.b, &beta, g.out, p.c, g.out, p.c, &algo,
                        workspace, static_cast<size_t>(cublas_workspace_bytes()), current_stream());
}

cublasStatus_t run(cublasLtHandle_t lt, const Plan& p, const cublasLtMatmulAlgo_t& algo, const Gemm& g,
                   void* workspace) {
  // alpha and beta are float32 for every dtype but float64 (the descriptor's scale type).
  return g.dtype == kFloat64 ? run<double>(lt, p, algo, g, workspace) : run<float>(lt, p, algo, g, workspace);
}

// Bytes from the start of a row-major operand with `rows` stored rows of leading dimension ld.
struct Extent {
  const char* begin;
  const char* end;
  bool overlaps(const Extent& o) const { return begin < o.end && o.begin < end; }
  size_t size() const { return static_cast<size_t>(end - begin); }
};
Extent extent(const void* data, int64_t rows, int64_t ld, int64_t esize) {
  const char* p = static_cast<const char*>(data);
  return {p, p + rows * ld * esize};
}
// The memory g's operands and output span.
Extent extent_a(const Gemm& g) { return extent(g.a.data, g.a.trans ? g.k : g.n, g.a.ld, dtype_size(g.dtype)); }
Extent extent_b(const Gemm& g) { return extent(g.b.data, g.b.trans ? g.m : g.k, g.b.ld, dtype_size(g.dtype)); }
Extent extent_out(const Gemm& g) { return extent(g.out, g.n, g.ldc, dtype_size(g.dtype)); }
// Whether g's output shares memory with an operand (then no candidate can be tried on g itself).
bool out_overlaps_input(const Gemm& g) {
  const Extent out = extent_out(g);
  return out.overlaps(extent_a(g)) || out.overlaps(extent_b(g));
}

// True when every one of the first `count` values at `host` (of `dtype`) is NaN.
bool all_nan(const std::vector<char>& host, DType dtype, int64_t count) {
  return TG_DISPATCH_FLOATING(dtype, "gemm_lt", [&] {
    const auto* v = reinterpret_cast<const scalar_t*>(host.data());
    return std::all_of(v, v + count, [](scalar_t x) { return std::isnan(static_cast<double>(x)); });
  });
}

// Removes the candidates of a ReLU epilogue that turn NaN into 0 (most of cuBLASLt's kernels keep it,
// as relu does, but not all): each runs on a probe of g's shape whose A is zeros after a leading
// NaN (all-ones bits, a NaN in every float format) and B zeros, and stays only if the first row of
// its output is NaN. The probe writes g.out, which the call's own run rewrites afterwards.
void keep_nan_propagating(cublasLtHandle_t lt, Plan& p, const Gemm& g, void* workspace) {
  const int64_t esize = dtype_size(g.dtype);
  const size_t bytes_a = extent_a(g).size(), bytes_b = extent_b(g).size();
  CachingAllocator& allocator = CachingAllocator::get();
  void* a = allocator.allocate(bytes_a, g.device);
  void* b = allocator.allocate(bytes_b, g.device);
  const cudaStream_t stream = current_stream();
  TG_CUDA_CHECK(cudaMemsetAsync(a, 0, bytes_a, stream));
  TG_CUDA_CHECK(cudaMemsetAsync(a, 0xFF, static_cast<size_t>(esize), stream));
  TG_CUDA_CHECK(cudaMemsetAsync(b, 0, bytes_b, stream));
  Gemm probe = g;
  probe.a.data = a;
  probe.b.data = b;
  std::vector<char> row(static_cast<size_t>(g.m * esize));
  std::vector<cublasLtMatmulAlgo_t> kept;
  for (const cublasLtMatmulAlgo_t& algo : p.candidates) {
    if (run(lt, p, algo, probe, workspace) != CUBLAS_STATUS_SUCCESS) continue;
    TG_CUDA_CHECK(cudaMemcpyAsync(row.data(), g.out, row.size(), cudaMemcpyDeviceToHost, stream));
    TG_CUDA_CHECK(cudaStreamSynchronize(stream));
    if (all_nan(row, g.dtype, g.m)) kept.push_back(algo);
  }
  allocator.deallocate(a);
  allocator.deallocate(b);
  p.candidates = std::move(kept);
  p.ok = !p.candidates.empty();  // none keeps NaN: the caller's separate kernels take over
  if (p.ok) p.algo = p.candidates.front();
}

// Times every candidate of `p` on g's own operands and keeps the fastest (for ReLU epilogues, among
// those that keep NaN). Running a candidate only rewrites g.out (beta is 0), so nothing runs when the
// output overlaps an input (a ReLU epilogue then goes unused), nor during graph capture (nothing may
// synchronize there).
void tune(cublasLtHandle_t lt, Plan& p, const Gemm& g, LtEpilogue e, void* workspace) {
  if (current_stream_capturing()) return;
  p.tuned = true;
  const bool overlap = out_overlaps_input(g);
  if (e == LtEpilogue::Relu || e == LtEpilogue::ReluMask) {
    if (overlap) {
      p.ok = false;
      return;
    }
    keep_nan_propagating(lt, p, g, workspace);
  }
  if (!p.ok || p.candidates.size() < 2 || !g_autotune.load() || overlap) return;
  cudaEvent_t start = nullptr, stop = nullptr;
  TG_CUDA_CHECK(cudaEventCreate(&start));
  TG_CUDA_CHECK(cudaEventCreate(&stop));
  float best = -1;
  for (const cublasLtMatmulAlgo_t& algo : p.candidates) {
    if (run(lt, p, algo, g, workspace) != CUBLAS_STATUS_SUCCESS) continue;  // warm-up; unsupported: skipped
    TG_CUDA_CHECK(cudaEventRecord(start, current_stream()));
    for (int r = 0; r < kTimedRuns; ++r) TG_CUBLAS_CHECK(run(lt, p, algo, g, workspace));
    TG_CUDA_CHECK(cudaEventRecord(stop, current_stream()));
    TG_CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    TG_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    if (best < 0 || ms < best) {
      best = ms;
      p.algo = algo;
    }
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
}

}  // namespace

void set_gemm_autotuning(bool enabled) { g_autotune.store(enabled); }

void clear_gemm_lt_plans() {
  std::lock_guard<std::mutex> lock(g_mutex);
  for (auto& [k, plan] : g_plans) destroy(plan);
  g_plans.clear();
}

bool gemm_lt(const Gemm& g, const LtArgs& args) {
  if (g.batch != 1 || g.beta != 0.0 || g.float32_out || !is_floating(g.dtype)) return false;
  const LtEpilogue e = args.epilogue;
  // 16-bit gradients get their bias gradient from the caller's separate kernels: with some of the
  // heuristic's algorithms cuBLASLt's bias-gradient epilogue summed a float16 gradient of 3 rows
  // wrong (off by 4.8 on sums under 3; found by the differential fuzzer, FuzzRegressions tests it).
  if (writes_bias_grad(e) && dtype_size(g.dtype) == 2) return false;
  // Epilogue kernels move the bias, its gradient and auxiliary rows in 16-byte vectors.
  const void* bias = writes_bias_grad(e) ? args.bias_grad : args.bias;
  if (bias != nullptr && alignment(bias) < 16) return false;
  if (writes_bias_grad(e) && bias == nullptr) return false;
  if (has_aux(e)) {
    const bool mask = e == LtEpilogue::ReluMask || e == LtEpilogue::ReluGrad;
    if (args.aux == nullptr || alignment(args.aux) < 16 || args.aux_ld < g.m) return false;
    if (args.aux_ld % (mask ? 128 : 8) != 0) return false;  // cuBLASLt's rule for the auxiliary rows
  }
  // Nothing to multiply: an empty output is done; bias gradients (zeros), auxiliary outputs and
  // k = 0 (a bias fill) are the caller's to write.
  if (g.n == 0 || g.m == 0 || g.k == 0) return g.k != 0 && !writes_bias_grad(e) && !has_aux(e);
  const int device = g.device.index;
  DeviceGuard guard(device);
  void* workspace = cublas_workspace(device);
  std::lock_guard<std::mutex> lock(g_mutex);
  cublasLtHandle_t lt = handle_locked(device);
  const PlanKey key{device, g.dtype, g.a.trans, g.b.trans, bias != nullptr, g.dtype == kFloat32 && allow_tf32(), e,
                    g.m, g.n, g.k, g.a.ld, g.b.ld, g.ldc, has_aux(e) ? args.aux_ld : 0,
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
  if (bias != nullptr) set_attr(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias);
  if (has_aux(e)) set_attr(plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, args.aux);
  if (!plan.tuned) {
    tune(lt, plan, g, e, workspace);
    // A choice made on g's own operands is the shape's for good: later processes read it back.
    if (plan.tuned && plan.ok && !out_overlaps_input(g)) save_choice(plan);
  }
  if (!plan.ok) return false;
  const cublasStatus_t st = run(lt, plan, plan.algo, g, workspace);
  if (st == CUBLAS_STATUS_NOT_SUPPORTED) {
    plan.ok = false;  // checked before anything was queued: the caller's plain path takes over
    return false;
  }
  TG_CUBLAS_CHECK(st);
  return true;
}

}  // namespace tg::cuda
