// CPU reduction loops over a ReducePlan: out[o] = combine over r of load(x offset, o, r).
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>

#include "ops/reduce/reduce_plan.h"

namespace tg::cpu {

// Calls fn(offset, linear index) for linear indices [lo, hi) of `space`, row-major, with the
// innermost dim as a tight loop.
template <typename Fn>
void for_each_in_range(const StridedSpace& space, int64_t lo, int64_t hi, Fn&& fn) {
  if (lo >= hi) return;
  if (space.ndim == 0) {
    fn(int64_t{0}, lo);
    return;
  }
  const int last = space.ndim - 1;
  int64_t idx[kMaxReduceDims];
  int64_t offset = 0;
  int64_t rest = lo;
  for (int d = last; d >= 0; --d) {
    idx[d] = rest % space.sizes[d];
    rest /= space.sizes[d];
    offset += idx[d] * space.strides[d];
  }
  const int64_t inner_size = space.sizes[last];
  const int64_t inner_stride = space.strides[last];
  int64_t linear = lo;
  while (linear < hi) {
    const int64_t run = std::min(inner_size - idx[last], hi - linear);
    for (int64_t k = 0; k < run; ++k) fn(offset + k * inner_stride, linear + k);
    linear += run;
    if (linear >= hi) break;
    // Step past the end of the innermost run: rewind it and carry into the outer dims.
    offset -= idx[last] * inner_stride;
    idx[last] = 0;
    for (int d = last - 1; d >= 0; --d) {
      offset += space.strides[d];
      if (++idx[d] < space.sizes[d]) break;
      offset -= idx[d] * space.strides[d];
      idx[d] = 0;
    }
  }
}

// Reduced elements per sequential block; longer runs split in halves (pairwise), which keeps
// float32 sums of millions of elements accurate.
inline constexpr int64_t kPairwiseBlock = 1024;

// Combines output o's reduced elements [lo, hi), output o's elements starting at offset `base`.
template <typename Acc, typename Load, typename Combine>
Acc reduce_span(const ReducePlan& p, int64_t base, int64_t o, int64_t lo, int64_t hi, Acc init, const Load& load,
                const Combine& combine) {
  if (hi - lo > kPairwiseBlock) {
    const int64_t mid = lo + (hi - lo) / 2;
    return combine(reduce_span(p, base, o, lo, mid, init, load, combine),
                   reduce_span(p, base, o, mid, hi, init, load, combine));
  }
  Acc acc = init;
  for_each_in_range(p.reduced, lo, hi, [&](int64_t off, int64_t r) { acc = combine(acc, load(base + off, o, r)); });
  return acc;
}

// Runs the reduction described by `p`. load(offset, o, r) reads one input element as an Acc;
// combine merges two Accs (associative); store(o, acc) writes output o.
template <typename Acc, typename Load, typename Combine, typename Store>
void reduce(const ReducePlan& p, Acc init, const Load& load, const Combine& combine, const Store& store) {
  int64_t min_red_stride = INT64_MAX;
  for (int d = 0; d < p.reduced.ndim; ++d) min_red_stride = std::min(min_red_stride, p.reduced.strides[d]);
  const int last = p.kept.ndim - 1;
  const bool outputs_innermost = last >= 0 && p.reduced.ndim > 0 && p.kept.strides[last] < min_red_stride;
  if (!outputs_innermost) {
    // Each output reads its reduced elements, which lie closer together than neighbouring outputs.
    for_each_in_range(p.kept, 0, p.n_out, [&](int64_t base, int64_t o) {
      store(o, reduce_span(p, base, o, 0, p.n_red, init, load, combine));
    });
    return;
  }
  // Neighbouring outputs are neighbours in memory: sweep the reduced elements once per row of
  // outputs, updating a row of accumulators (vectorizable, cache friendly).
  StridedSpace rows = p.kept;
  rows.ndim = last;
  const int64_t width = p.kept.sizes[last];
  const int64_t step = p.kept.strides[last];
  std::unique_ptr<Acc[]> acc(new Acc[static_cast<size_t>(width)]);  // not vector: Acc may be bool
  for_each_in_range(rows, 0, p.n_out / width, [&](int64_t base, int64_t row) {
    const int64_t first = row * width;
    for (int64_t j = 0; j < width; ++j) acc[j] = init;
    for_each_in_range(p.reduced, 0, p.n_red, [&](int64_t off, int64_t r) {
      const int64_t at = base + off;
      for (int64_t j = 0; j < width; ++j) acc[j] = combine(acc[j], load(at + j * step, first + j, r));
    });
    for (int64_t j = 0; j < width; ++j) store(first + j, acc[j]);
  });
}

}  // namespace tg::cpu
