#include "ops/core/cpu/threads.h"

#include <Eigen/Core>

#include <atomic>
#include <mutex>

#include "ops/linalg/cpu/openblas.h"
#include "tensor/check.h"

namespace tg {
namespace {

std::atomic<int> g_threads{1};
std::once_flag g_applied;

void apply(int n) {
  Eigen::setNbThreads(n);
#ifdef TG_WITH_CBLAS
  if (const cpu::OpenBlas* blas = cpu::openblas()) blas->set_num_threads(n);
#endif
}

}  // namespace

void set_num_threads(int n) {
  TG_CHECK(n >= 1, "[set_num_threads] expected a thread count of at least 1, got ", n);
  g_threads.store(n);
  std::call_once(g_applied, [] {});  // later first uses must not reset the user's choice
  apply(n);
}

int get_num_threads() { return g_threads.load(); }

namespace cpu {
void apply_thread_setting_once() {
  std::call_once(g_applied, [] { apply(g_threads.load()); });
}
}  // namespace cpu

}  // namespace tg
