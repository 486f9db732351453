#include "ops/linalg/cpu/onednn_gemm.h"

#include <climits>

#include "ops/core/cpu/threads.h"
#include "tensor/check.h"

#ifdef TG_WITH_DNNL
#include <dlfcn.h>
#include <oneapi/dnnl/dnnl.h>
#endif

namespace tg::cpu {

#ifdef TG_WITH_DNNL
namespace {

// OpenMP's thread-count entry points, from the runtime oneDNN loaded (tapegraph links no OpenMP
// itself); null where oneDNN was built on another threading runtime.
struct OpenMpThreads {
  int (*get_max)() = nullptr;
  void (*set)(int) = nullptr;
};

const OpenMpThreads& openmp() {
  static const OpenMpThreads api = [] {
    OpenMpThreads a;
    a.get_max = reinterpret_cast<int (*)()>(::dlsym(RTLD_DEFAULT, "omp_get_max_threads"));
    a.set = reinterpret_cast<void (*)(int)>(::dlsym(RTLD_DEFAULT, "omp_set_num_threads"));
    if (a.get_max == nullptr || a.set == nullptr) a = {};
    return a;
  }();
  return api;
}

}  // namespace

void sync_onednn_threads() {
  // The OpenMP setting belongs to each thread: checked on every call, set when it differs.
  const OpenMpThreads& omp = openmp();
  if (omp.set == nullptr) return;
  const int want = get_num_threads();
  if (omp.get_max() != want) omp.set(want);
}

bool onednn_sgemm(const Gemm& g) {
  if (g.dtype != kFloat32 || g.n * g.m * g.k < kOneDnnMinMultiplyAdds) return false;
  const int64_t a_cols = g.a.trans ? g.n : g.k, b_cols = g.b.trans ? g.k : g.m;
  if (g.a.ld < a_cols || g.b.ld < b_cols || g.ldc < g.m) return false;
  for (int64_t v : {g.n, g.m, g.k, g.a.ld, g.b.ld, g.ldc})
    if (v > INT32_MAX) return false;
  sync_onednn_threads();
  const float* a = static_cast<const float*>(g.a.data);
  const float* b = static_cast<const float*>(g.b.data);
  float* c = static_cast<float*>(g.out);
  for (int64_t i = 0; i < g.batch; ++i) {
    // Row-major C[n, m] = alpha * op(A)[n, k] @ op(B)[k, m] + beta * C.
    const dnnl_status_t st = dnnl_sgemm(g.a.trans ? 'T' : 'N', g.b.trans ? 'T' : 'N', g.n, g.m, g.k,
                                        static_cast<float>(g.alpha), a + i * g.a.batch_stride, g.a.ld,
                                        b + i * g.b.batch_stride, g.b.ld, static_cast<float>(g.beta),
                                        c + i * g.out_batch_stride, g.ldc);
    TG_CHECK(st == dnnl_success, "[mm] oneDNN sgemm failed with status ", static_cast<int>(st), " for ", g.n, "x",
             g.k, " @ ", g.k, "x", g.m);
  }
  return true;
}
#else
void sync_onednn_threads() {}
bool onednn_sgemm(const Gemm&) { return false; }
#endif

}  // namespace tg::cpu
