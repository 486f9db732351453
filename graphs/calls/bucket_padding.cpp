// Padding a call up to its shape buckets, the compiled body reading the extents, and narrowing
// outputs back. See Note [Shape buckets] in docs/shape_buckets.md.
#include "graphs/calls/bucket_padding.h"

#include <algorithm>
#include <sstream>

#include "graphs/runtime/cudagraph_step.h"
#include "ops/core/dispatch.h"
#include "ops/factory/factory.h"
#include "ops/shape/pad.h"
#include "tensor/grad_mode.h"

namespace tg::graphs {

namespace {

std::string sizes_str(const std::vector<int64_t>& v) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < v.size(); ++i) os << (i ? ", " : "") << v[i];
  os << "]";
  return os.str();
}

// "input 'x'" for a name, "input 'x'" or "input 0" for a position (as flattened calls name tensors).
std::string display_name(const ArgRef& ref, const std::vector<std::string>& input_names) {
  if (ref.index < 0) return "input '" + ref.name + "'";
  const auto i = static_cast<size_t>(ref.index);
  return i < input_names.size() ? "input '" + input_names[i] + "'" : "input " + std::to_string(ref.index);
}

// `t` grown along `dim` by `amount` elements of `value` (differentiable: tg::pad is built from cat).
Tensor pad_dim(const Tensor& t, int64_t dim, int64_t amount, double value) {
  Shape amounts(static_cast<size_t>(2 * (t.dim() - dim)), 0);
  amounts[static_cast<size_t>(2 * (t.dim() - 1 - dim) + 1)] = amount;
  return pad(t, amounts, "constant", value);
}

}  // namespace

BucketPlan::BucketPlan(std::vector<ShapeBucket> buckets, const std::vector<std::string>& input_names,
                       bool fixed_buffers)
    : buckets_(std::move(buckets)), fixed_buffers_(fixed_buffers) {
  std::vector<std::pair<std::string, int64_t>> seen;
  for (size_t b = 0; b < buckets_.size(); ++b) {
    const ShapeBucket& k = buckets_[b];
    const std::string which = "shape_buckets[" + std::to_string(b) + "]";
    TG_CHECK(!k.dims.empty(), "[compile] ", which, " pads no dims; expected at least one {input, dim}");
    TG_CHECK(!k.sizes.empty(), "[compile] ", which, " has no sizes; expected ascending sizes such as "
             "tg::evenly_spaced_buckets(512, 8)");
    for (size_t i = 0; i < k.sizes.size(); ++i) {
      TG_CHECK(k.sizes[i] >= 1, "[compile] ", which, " sizes ", sizes_str(k.sizes), ": expected sizes >= 1, got ",
               k.sizes[i]);
      TG_CHECK(i == 0 || k.sizes[i] > k.sizes[i - 1], "[compile] ", which, " sizes ", sizes_str(k.sizes),
               ": expected strictly ascending sizes");
    }
    std::vector<std::string> names;
    for (const BucketedDim& d : k.dims) {
      TG_CHECK(d.input.index >= 0 || !d.input.name.empty(), "[compile] ", which,
               " names an input by an empty name; expected a name of input_names or a position >= 0");
      names.push_back(display_name(d.input, input_names));
      // Negative dims are told apart from positive ones only at the call, where the rank is known.
      const std::pair<std::string, int64_t> key{names.back(), d.dim};
      TG_CHECK(std::find(seen.begin(), seen.end(), key) == seen.end(), "[compile] ", which, " pads ", names.back(),
               " dim ", d.dim, " that an earlier bucket dim pads already; expected each dim in one bucket once");
      seen.push_back(key);
    }
    for (const BucketedOutput& o : k.outputs)
      TG_CHECK(o.output >= 0, "[compile] ", which, " narrows output ", o.output, "; expected a position >= 0");
    display_.push_back(std::move(names));
  }
}

PaddedCall BucketPlan::pad(const CallArgs& call) const {
  PaddedCall out;
  out.call = call;
  out.user_tensors = call.tensors.size();
  std::vector<std::pair<size_t, int64_t>> all;  // every padded (position, dim), to find one twice
  for (size_t b = 0; b < buckets_.size(); ++b) {
    const ShapeBucket& k = buckets_[b];
    std::vector<std::pair<size_t, int64_t>> where;
    int64_t extent = -1;
    std::string first;
    for (size_t j = 0; j < k.dims.size(); ++j) {
      const std::string& name = display_[b][j];
      const auto it = std::find(call.names.begin(), call.names.end(), name);
      if (it == call.names.end()) {
        std::ostringstream os;
        for (size_t i = 0; i < call.names.size(); ++i) os << (i ? ", " : "") << call.names[i];
        TG_FAIL("[compile] shape_buckets[", b, "] pads ", name, ", which is no tensor argument of this call; "
                "tensor arguments: ", call.names.empty() ? std::string("none") : os.str());
      }
      const auto pos = static_cast<size_t>(it - call.names.begin());
      const Tensor& t = call.tensors[pos];
      const int64_t n = t.dim();
      const int64_t dim = k.dims[j].dim;
      TG_CHECK(dim >= -n && dim < n && n > 0, "[compile] shape_buckets[", b, "] pads ", name, " dim ", dim,
               ", out of range for its ", n, " dim(s) ", shape_str(t.sizes()));
      const int64_t d = dim < 0 ? dim + n : dim;
      TG_CHECK(std::find(all.begin(), all.end(), std::pair{pos, d}) == all.end(), "[compile] shape_buckets[", b,
               "] pads ", name, " dim ", d, ", which another bucket dim pads already");
      all.emplace_back(pos, d);
      where.emplace_back(pos, d);
      if (extent < 0) {
        extent = t.size(d);
        first = name + " dim " + std::to_string(d);
      } else {
        TG_CHECK(t.size(d) == extent, "[compile] shape_buckets[", b, "]: ", name, " dim ", d, " has size ", t.size(d),
                 " but ", first, " has size ", extent, "; the dims of one bucket must have one size");
      }
    }
    const auto size_it = std::lower_bound(k.sizes.begin(), k.sizes.end(), extent);
    TG_CHECK(size_it != k.sizes.end(), "[compile] shape_buckets[", b, "]: ", first, " has size ", extent,
             ", larger than the largest bucket ", k.sizes.back(), " (sizes ", sizes_str(k.sizes),
             "); expected a size <= ", k.sizes.back(), ", or add a larger bucket");
    const int64_t size = *size_it;
    for (size_t j = 0; j < where.size(); ++j) {
      Tensor& t = out.call.tensors[where[j].first];
      if (fixed_buffers_ && !t.requires_grad()) {
        t = pad_into_buffer(t, b, where[j].first, where[j].second, size, k.dims[j].pad_value);
        out.padded = out.padded || size > extent;
      } else if (size > extent) {
        t = pad_dim(t, where[j].second, size - extent, k.dims[j].pad_value);
        out.padded = true;
      } else if (!t.is_contiguous()) {
        // Padded tensors are contiguous (tg::pad is a cat): laid out alike, a call that needs no
        // padding shares their variant instead of compiling one for its strides.
        t = t.contiguous();
      } else if (is_static_address(t)) {
        // Bucketed inputs are never read in place: one variant serves padded (fresh) tensors too.
        t = t.clone();
      }
      // One layout per variant: the strides of size-1 dims are free in a contiguous tensor (a cat
      // keeps its operand's), and guards compare them.
      const Shape canonical = contiguous_strides(t.sizes());
      if (t.strides() != canonical) t = t.as_strided(t.sizes(), canonical, t.storage_offset());
    }
    out.extents.push_back(extent);
    out.sizes.push_back(size);
    out.where.push_back(std::move(where));
  }
  for (size_t b = 0; b < buckets_.size(); ++b) {
    // A 0-dim CPU tensor, made anew on every call outside any trace (as a dynamic scalar).
    OpObserverGuard not_traced(nullptr);
    out.call.tensors.push_back(scalar_tensor(out.extents[b], {.dtype = kInt64}));
    out.call.names.push_back("extent of shape_buckets[" + std::to_string(b) + "]");
  }
  return out;
}

Tensor BucketPlan::pad_into_buffer(const Tensor& t, size_t bucket, size_t position, int64_t dim, int64_t size,
                                   double value) const {
  Shape sizes = t.sizes();
  sizes[static_cast<size_t>(dim)] = size;
  Tensor& buffer = buffers_[{bucket, position, size}];
  // A buffer is refilled only when no view of it is alive (an output over it that the caller holds)
  // and no compiled backward is pending (whose saved activations may be the buffer); otherwise a new
  // one takes its place, and the graphs update to its address.
  const bool reusable = buffer.defined() && buffer.sizes() == sizes && buffer.dtype() == t.dtype() &&
                        buffer.device() == t.device() && !backward_pending() &&
                        buffer.impl()->storage().use_count() == 1;
  if (!reusable) {
    OpObserverGuard not_traced(nullptr);
    buffer = tg::empty(sizes, {.dtype = t.dtype(), .device = t.device()});
    mark_static_address(buffer);
  }
  NoGradGuard no_grad;
  const int64_t extent = t.size(dim);
  buffer.narrow(dim, 0, extent).copy_(t);
  if (size > extent) buffer.narrow(dim, extent, size - extent).fill_(value);
  return buffer;
}

GraphFn BucketPlan::wrap(GraphFn fn, std::shared_ptr<const PaddedCall*> current) const {
  return [fn = std::move(fn), current = std::move(current)](const TensorList& xs) -> TensorList {
    const PaddedCall& call = **current;
    TG_CHECK(xs.size() == call.user_tensors + call.where.size(), "[compile] internal: the bucketed body got ",
             xs.size(), " tensors, expected ", call.user_tensors + call.where.size());
    BucketScope scope;
    for (size_t b = 0; b < call.where.size(); ++b)
      for (const auto& [pos, dim] : call.where[b])
        scope.entries.push_back({xs[pos].impl(), dim, xs[call.user_tensors + b]});
    BucketScopeGuard guard(&scope);
    return fn(TensorList(xs.begin(), xs.begin() + static_cast<ptrdiff_t>(call.user_tensors)));
  };
}

TensorList BucketPlan::narrow_outputs(TensorList outputs, const PaddedCall& call) const {
  for (size_t b = 0; b < buckets_.size(); ++b) {
    for (const BucketedOutput& o : buckets_[b].outputs) {
      TG_CHECK(static_cast<size_t>(o.output) < outputs.size(), "[compile] shape_buckets[", b, "] narrows output ",
               o.output, " but the function returned ", outputs.size(), " output(s)");
      Tensor& t = outputs[static_cast<size_t>(o.output)];
      const int64_t n = t.dim();
      TG_CHECK(o.dim >= -n && o.dim < n && n > 0, "[compile] shape_buckets[", b, "] narrows output ", o.output,
               " dim ", o.dim, ", out of range for its ", n, " dim(s) ", shape_str(t.sizes()));
      const int64_t d = o.dim < 0 ? o.dim + n : o.dim;
      TG_CHECK(t.size(d) == call.sizes[b], "[compile] shape_buckets[", b, "] narrows output ", o.output, " dim ", d,
               " of size ", t.size(d), "; expected the bucket's size ", call.sizes[b], " (shape ",
               shape_str(t.sizes()), ")");
      if (call.extents[b] < call.sizes[b]) t = t.narrow(d, 0, call.extents[b]);
    }
  }
  return outputs;
}

bool BucketPlan::bucketed(const std::string& name, int64_t dim, int64_t ndim) const {
  for (size_t b = 0; b < buckets_.size(); ++b)
    for (size_t j = 0; j < buckets_[b].dims.size(); ++j) {
      const int64_t d = buckets_[b].dims[j].dim;
      if (display_[b][j] == name && (d < 0 ? d + ndim : d) == dim) return true;
    }
  return false;
}

}  // namespace tg::graphs
