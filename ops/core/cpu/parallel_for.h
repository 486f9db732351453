// A minimal parallel loop for CPU kernels whose work splits into independent index ranges (the
// random fills: each Philox block is computed from its own counter). Threads are started per call
// and joined before it returns, so callers need no pool and nothing outlives the call.
#pragma once

#include <cstdint>
#include <functional>

namespace tg::cpu {

// Threads parallel_for may run at once: the CPUs this process may use (at least 1).
int parallel_for_threads();

// Runs fn(begin, end) over disjoint ranges that cover [0, n), each at least `grain` long except
// the last; ranges run on up to parallel_for_threads() threads (the caller runs one of them), or
// all on the caller when n < 2 * grain or when called from inside another parallel_for.
void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

}  // namespace tg::cpu
