// Shape buckets: a compiled function pads chosen dims of chosen inputs up to one of a few sizes, so
// inputs whose sizes keep changing (batch sizes, sequence lengths) share a few compiled variants.
// See Note [Shape buckets] in docs/shape_buckets.md.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace tg {

// An argument of a compiled function: its position in the call, or its name in
// CompileOptions::input_names.
struct ArgRef {
  ArgRef(int position) : index(position) {}
  ArgRef(const char* arg_name) : name(arg_name) {}
  ArgRef(std::string arg_name) : name(std::move(arg_name)) {}
  int index = -1;    // position, when named by position
  std::string name;  // name, when named by name
};

// One dim of one tensor argument that a bucket pads.
struct BucketedDim {
  ArgRef input;
  int64_t dim = 0;         // negative counts from the last dim
  double pad_value = 0.0;  // what fills the padding, e.g. -100 (cross_entropy's ignore_index) for labels
};

// An output dim narrowed back to the true extent after the call (it must have the bucket's size).
struct BucketedOutput {
  int output = 0;   // position among the function's outputs
  int64_t dim = 0;  // negative counts from the last dim
};

// Dims padded together to the smallest of `sizes` that holds them: they must have one size in a
// call (the true extent), which the function reads with tg::bucket_extent or tg::bucket_mask.
struct ShapeBucket {
  std::vector<BucketedDim> dims;
  std::vector<int64_t> sizes;           // strictly ascending, at least 1; a larger call raises
  std::vector<BucketedOutput> outputs;  // outputs that carry the dim, narrowed back (none by default)
};

// `count` sizes evenly spaced up to `max`: ceil(max * k / count) for k = 1..count, each rounded up
// to a multiple of `multiple_of` (e.g. 8 sizes up to 512: 64, 128, ..., 512).
std::vector<int64_t> evenly_spaced_buckets(int64_t max, int count, int64_t multiple_of = 1);
// Powers of two from the one at or above `min` up to the one at or above `max` (e.g. 16..512:
// 16, 32, 64, 128, 256, 512).
std::vector<int64_t> pow2_buckets(int64_t min, int64_t max);

// The true extent of dim `dim` of `x` (an argument of a call of a compiled function with shape
// buckets, as the function received it) before padding: a 0-dim int64 CPU tensor, a graph input
// of the compiled variant, so one variant serves every extent of its bucket. For any other tensor
// (an unbucketed dim, eager code, a function without buckets) it is x.size(dim), so the function
// runs unchanged without compile().
Tensor bucket_extent(const Tensor& x, int64_t dim);
// A 1-dim bool tensor on x's device, of x.size(dim) elements: true at the positions before the
// true extent (real data), false on the padding; e.g. bucket_mask(x, 0).to(kFloat32) weighs the
// rows of a loss.
Tensor bucket_mask(const Tensor& x, int64_t dim);
// The opposite of bucket_mask: true on the padding, as MultiheadAttention's key_padding_mask
// (expanded over the batch) wants it.
Tensor bucket_padding_mask(const Tensor& x, int64_t dim);

namespace graphs {

// The bucketed dims of one call as the compiled function's body sees them: which of its tensor
// arguments carry which bucket, and the extents (set for the duration of one run of the body).
struct BucketScope {
  struct Entry {
    const TensorImpl* tensor;
    int64_t dim;     // normalized
    Tensor extent;   // 0-dim int64
  };
  std::vector<Entry> entries;
};

// Makes `scope` the one bucket_extent reads on this thread until destroyed (restoring the previous).
class BucketScopeGuard {
 public:
  explicit BucketScopeGuard(const BucketScope* scope);
  ~BucketScopeGuard();
  BucketScopeGuard(const BucketScopeGuard&) = delete;
  BucketScopeGuard& operator=(const BucketScopeGuard&) = delete;

 private:
  const BucketScope* previous_;
};

}  // namespace graphs
}  // namespace tg
