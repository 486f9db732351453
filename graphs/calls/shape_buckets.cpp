// bucket_extent / bucket_mask and the bucket-size helpers. See Note [Shape buckets] in
// docs/shape_buckets.md.
#include "graphs/calls/shape_buckets.h"

#include "ops/elementwise/compare.h"
#include "ops/factory/factory.h"

namespace tg {

namespace {

// The scope of the compiled body running on this thread, if any.
thread_local const graphs::BucketScope* current_scope = nullptr;

int64_t normalize_dim(const char* who, const Tensor& x, int64_t dim) {
  const int64_t n = x.dim();
  TG_CHECK(dim >= -n && dim < n && n > 0, "[", who, "] dim ", dim, " is out of range for a tensor of ", n,
           " dim(s); expected a dim in [", -n, ", ", n, ")");
  return dim < 0 ? dim + n : dim;
}

}  // namespace

std::vector<int64_t> evenly_spaced_buckets(int64_t max, int count, int64_t multiple_of) {
  TG_CHECK(max >= 1 && count >= 1 && multiple_of >= 1, "[evenly_spaced_buckets] expected max >= 1, count >= 1 and "
           "multiple_of >= 1, got max ", max, ", count ", count, ", multiple_of ", multiple_of);
  std::vector<int64_t> sizes;
  for (int k = 1; k <= count; ++k) {
    int64_t s = (max * k + count - 1) / count;
    s = (s + multiple_of - 1) / multiple_of * multiple_of;
    if (sizes.empty() || s > sizes.back()) sizes.push_back(s);
  }
  return sizes;
}

std::vector<int64_t> pow2_buckets(int64_t min, int64_t max) {
  TG_CHECK(min >= 1 && max >= min, "[pow2_buckets] expected 1 <= min <= max, got min ", min, ", max ", max);
  int64_t s = 1;
  while (s < min) s *= 2;
  std::vector<int64_t> sizes{s};
  while (sizes.back() < max) sizes.push_back(sizes.back() * 2);
  return sizes;
}

Tensor bucket_extent(const Tensor& x, int64_t dim) {
  const int64_t d = normalize_dim("bucket_extent", x, dim);
  if (current_scope)
    for (const graphs::BucketScope::Entry& e : current_scope->entries)
      if (e.tensor == x.impl() && e.dim == d) return e.extent;
  // Not bucketed: the size itself (a constant of the graph when traced).
  return scalar_tensor(x.size(d), {.dtype = kInt64});
}

Tensor bucket_mask(const Tensor& x, int64_t dim) {
  const int64_t d = normalize_dim("bucket_mask", x, dim);
  return lt(arange(x.size(d), {.dtype = kInt64, .device = x.device()}), bucket_extent(x, d));
}

Tensor bucket_padding_mask(const Tensor& x, int64_t dim) {
  const int64_t d = normalize_dim("bucket_padding_mask", x, dim);
  return ge(arange(x.size(d), {.dtype = kInt64, .device = x.device()}), bucket_extent(x, d));
}

namespace graphs {

BucketScopeGuard::BucketScopeGuard(const BucketScope* scope) : previous_(current_scope) { current_scope = scope; }

BucketScopeGuard::~BucketScopeGuard() { current_scope = previous_; }

}  // namespace graphs
}  // namespace tg
