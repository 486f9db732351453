#include "ops/core/cpu/parallel_for.h"

#include <sched.h>

#include <algorithm>
#include <exception>
#include <system_error>
#include <thread>
#include <vector>

namespace tg::cpu {
namespace {

// True on a thread running a range of some parallel_for: nested loops stay on that thread.
thread_local bool t_in_parallel_for = false;

int usable_cpus() {
#ifdef CPU_COUNT
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
#endif
  return std::max(1u, std::thread::hardware_concurrency());
}

// Runs fn over [begin, end) as a range of a parallel loop, keeping its first exception in `error`.
void run_range(const std::function<void(int64_t, int64_t)>& fn, int64_t begin, int64_t end, std::exception_ptr& error) {
  t_in_parallel_for = true;
  try {
    fn(begin, end);
  } catch (...) {
    error = std::current_exception();
  }
  t_in_parallel_for = false;
}

}  // namespace

int parallel_for_threads() {
  static const int threads = usable_cpus();
  return threads;
}

void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  const int64_t ranges = std::min<int64_t>(parallel_for_threads(), n / grain);
  if (ranges < 2 || t_in_parallel_for) {
    fn(0, n);
    return;
  }
  // Equal ranges, the remainder spread one element each over the first ones.
  const int64_t base = n / ranges, extra = n % ranges;
  auto range_begin = [&](int64_t r) { return r * base + std::min(r, extra); };
  std::vector<std::exception_ptr> errors(static_cast<size_t>(ranges));
  std::vector<std::thread> workers;
  workers.reserve(static_cast<size_t>(ranges - 1));
  int64_t started = 1;
  try {
    for (; started < ranges; ++started)
      workers.emplace_back(run_range, std::cref(fn), range_begin(started), range_begin(started + 1),
                           std::ref(errors[static_cast<size_t>(started)]));
  } catch (const std::system_error&) {
    // No more threads to be had: the caller runs the ranges left.
  }
  for (int64_t r = started; r < ranges; ++r)
    run_range(fn, range_begin(r), range_begin(r + 1), errors[static_cast<size_t>(r)]);
  run_range(fn, 0, range_begin(1), errors[0]);
  for (std::thread& w : workers) w.join();
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace tg::cpu
