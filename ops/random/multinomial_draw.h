// How multinomial turns Philox words into samples, shared by the CPU loop and the CUDA kernels so
// that both devices draw the same indices from the same generator state.
//
// Mapping (documented contract): element e of a draw uses the two 32-bit words 2 * (e % 2) and
// 2 * (e % 2) + 1 of Philox block offset + e / 2 (see ops/random/random_dist.h). With replacement, element
// e = row * num_samples + s is sample s's uniform; without replacement, element e = row * categories
// + c is category c's exponential race time. An op reserves ceil(elements / 2) blocks.
#pragma once

#include <math.h>

#include <cstdint>

#include "tensor/hd.h"

namespace tg {

// Uniform double on (0, 1) from 64 bits: the top 53 bits plus half a step, so log() stays finite.
TG_HD double open_uniform_double(uint32_t hi, uint32_t lo) {
  const uint64_t bits = (static_cast<uint64_t>(hi) << 32) | lo;
  return (static_cast<double>(bits >> 11) + 0.5) * 0x1p-53;
}

// Sampling without replacement as an exponential race: the categories with the largest w / E, E ~
// Exp(1), are a sample drawn one by one in proportion to the remaining weights (the Gumbel top-k
// trick, which PyTorch uses too). Zero weights get key 0 and so come last.
TG_HD double race_key(double w, uint32_t hi, uint32_t lo) { return w / -::log(open_uniform_double(hi, lo)); }

// The category of uniform u in [0, 1) under the running sums cdf[0..n) of a row's weights: the first
// whose running sum exceeds u * total. Zero-weight categories never qualify (their running sum
// equals their predecessor's); should rounding put u * total at the total, the last category of
// positive weight is taken.
TG_HD int64_t sample_from_cdf(const double* cdf, int64_t n, double u) {
  const double total = cdf[n - 1];
  const double target = u * total;
  int64_t lo = 0, hi = n;  // first index with cdf > target
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (cdf[mid] > target) hi = mid;
    else lo = mid + 1;
  }
  if (lo < n) return lo;
  lo = 0;
  hi = n - 1;  // first index with cdf >= total: the last positive weight
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (cdf[mid] >= total) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}

}  // namespace tg
