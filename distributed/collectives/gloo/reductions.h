// The arithmetic of the CPU backend's reductions: the dtype partial sums travel in, the element-wise
// function Gloo's allreduce calls for every dtype and reduce op, and the last step that turns a
// reduced block into the result (avg's division, 16-bit floats' one rounding).
// See Note [CPU collectives] in docs/data_parallel.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

#include "distributed/collectives/process_group.h"

namespace tg::distributed {

// The dtype partial results travel and accumulate in: float32 for float16 and bfloat16 (rounded once,
// at the end), the dtype itself otherwise.
DType wire_dtype(DType t);

// out[i] = a[i] (op) b[i] over n elements of a wire dtype; `out` may be `a`. Gloo's signature.
using ReduceFunction = std::function<void(void* out, const void* a, const void* b, size_t n)>;

// The function combining two partial results of wire dtype `wire` for `op`: sums wrap around for
// integers, max lets NaN win, both are "or" for booleans, avg sums (finish_reduction divides).
// Throws tg::Error for a dtype or op that cannot be reduced.
ReduceFunction reduce_function(DType wire, ReduceOp op);

// Writes n elements of dtype `t` from `src` into `dst` in t's wire dtype (widening 16-bit floats).
void to_wire(DType t, const void* src, void* dst, int64_t n);

// Turns n fully reduced wire elements at `acc` into dtype `t` at `out`: divided by `world` for avg,
// rounded once for 16-bit floats. `acc` may be `out` when `t` is its own wire dtype.
void finish_reduction(DType t, ReduceOp op, int world, void* acc, void* out, int64_t n);

}  // namespace tg::distributed
