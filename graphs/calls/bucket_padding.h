// How compile() applies CompileOptions::shape_buckets to a call: pads the bucketed dims, hands the
// function the true extents, and narrows the declared outputs back. See Note [Shape buckets] in
// docs/shape_buckets.md.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "graphs/calls/shape_buckets.h"
#include "graphs/capture/joint.h"
#include "graphs/compile_options.h"

namespace tg::graphs {

// One call after padding.
struct PaddedCall {
  CallArgs call;                // bucketed tensors padded, then one extent tensor per bucket appended
  size_t user_tensors = 0;      // tensors of the call before the extents
  std::vector<int64_t> extents;  // per bucket: the true extent
  std::vector<int64_t> sizes;    // per bucket: the size padded to
  bool padded = false;           // some dim grew
  // Per bucket: the (tensor position, normalized dim) pairs it pads.
  std::vector<std::vector<std::pair<size_t, int64_t>>> where;
};

// The validated buckets of one compiled function.
class BucketPlan {
 public:
  // Checks the buckets (sizes ascending and positive, dims given, no dim twice) and raises a
  // tg::Error naming what was given otherwise. `input_names` resolve positions to display names.
  // With `fixed_buffers` (the cudagraphs backend), inputs that need no gradient are padded into
  // buffers kept per bucket and input, at fixed addresses, so graphs and the activations saved for
  // their backward read them in place (Note [Shape buckets]).
  BucketPlan(std::vector<ShapeBucket> buckets, const std::vector<std::string>& input_names,
             bool fixed_buffers = false);
  bool empty() const { return buckets_.empty(); }
  // Pads the call's bucketed dims up to their buckets and appends the extents.
  PaddedCall pad(const CallArgs& call) const;
  // `fn` as the compiled body: it receives the padded tensors and the extents, makes the extents
  // readable through bucket_extent while running, and hands `fn` the padded tensors alone.
  // `current` names the call being run (set by the caller around each run).
  GraphFn wrap(GraphFn fn, std::shared_ptr<const PaddedCall*> current) const;
  // Narrows the declared outputs back to the true extents.
  TensorList narrow_outputs(TensorList outputs, const PaddedCall& call) const;
  // True when the tensor named `name` has its dim `dim` (normalized for `ndim` dims) bucketed.
  bool bucketed(const std::string& name, int64_t dim, int64_t ndim) const;

 private:
  // `t` padded along `dim` up to `size` with `value`, into the fixed buffer of (`bucket`, `position`).
  Tensor pad_into_buffer(const Tensor& t, size_t bucket, size_t position, int64_t dim, int64_t size,
                         double value) const;

  std::vector<ShapeBucket> buckets_;
  std::vector<std::vector<std::string>> display_;  // per bucket, per dim: "input 'x'" / "input 0"
  bool fixed_buffers_ = false;
  // The fixed buffers by (bucket, tensor position, padded size); reused while nothing else holds them.
  mutable std::map<std::tuple<size_t, size_t, int64_t>, Tensor> buffers_;
};

}  // namespace tg::graphs
