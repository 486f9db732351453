#include "ops/linalg/cpu/openblas.h"

#include <cstdlib>

#include "ops/core/cpu/vector_isa.h"

#ifdef TG_WITH_CBLAS
#include <dlfcn.h>
#endif

namespace tg::cpu {

std::string openblas_core_for_this_cpu() {
  switch (cpu_vector_isa()) {
    case VectorIsa::Avx512: return "SkylakeX";
    case VectorIsa::Avx2: return "Haswell";
    case VectorIsa::Baseline: break;
  }
#if TG_CPU_ISA_VARIANTS
  if (__builtin_cpu_supports("avx")) return "Sandybridge";  // cpu_vector_isa() ran __builtin_cpu_init
#endif
  return "";
}

#ifdef TG_WITH_CBLAS
namespace {

// dlopen with OPENBLAS_CORETYPE set for the library's constructor, unless the user set it.
void* open_library() {
  const char* user = std::getenv("OPENBLAS_CORETYPE");
  const std::string core = openblas_core_for_this_cpu();
  const bool set_here = (user == nullptr || *user == '\0') && !core.empty();
  if (set_here) ::setenv("OPENBLAS_CORETYPE", core.c_str(), 1);
  // The library found at build time, else the loader's search path.
  void* handle = ::dlopen(TG_OPENBLAS_LIBRARY, RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) handle = ::dlopen(TG_OPENBLAS_SONAME, RTLD_NOW | RTLD_LOCAL);
  if (set_here) ::unsetenv("OPENBLAS_CORETYPE");
  return handle;
}

template <typename Fn>
bool resolve(void* handle, const char* name, Fn& fn) {
  fn = reinterpret_cast<Fn>(::dlsym(handle, name));
  return fn != nullptr;
}

}  // namespace

const OpenBlas* openblas() {
  static const OpenBlas* api = [] () -> const OpenBlas* {
    void* handle = open_library();
    if (handle == nullptr) return nullptr;
    static OpenBlas a;
    const bool ok = resolve(handle, "cblas_sgemm", a.sgemm) && resolve(handle, "cblas_dgemm", a.dgemm) &&
                    resolve(handle, "openblas_set_num_threads", a.set_num_threads) &&
                    resolve(handle, "openblas_get_corename", a.get_corename) &&
                    resolve(handle, "openblas_get_config", a.get_config);
    return ok ? &a : nullptr;
  }();
  return api;
}

std::string openblas_core() {
  const OpenBlas* b = openblas();
  return b != nullptr ? std::string(b->get_corename()) : std::string();
}
bool openblas_chooses_kernels() {
  const OpenBlas* b = openblas();
  return b != nullptr && std::string(b->get_config()).find("DYNAMIC_ARCH") != std::string::npos;
}
#else
std::string openblas_core() { return ""; }
bool openblas_chooses_kernels() { return false; }
#endif

}  // namespace tg::cpu
