#include "ops/reduce/reduce_plan.h"

#include <algorithm>
#include <utility>

#include "tensor/check.h"

namespace tg {
namespace {

using DimList = std::vector<std::pair<int64_t, int64_t>>;  // (size, stride), outermost first

// Merges neighbours that walk memory as one dim (outer stride == inner size * inner stride).
DimList merge_dims(const DimList& dims) {
  DimList out;
  for (const auto& d : dims) {
    if (!out.empty() && out.back().second == d.first * d.second) {
      out.back().first *= d.first;
      out.back().second = d.second;
    } else {
      out.push_back(d);
    }
  }
  return out;
}

StridedSpace to_space(const DimList& dims, int64_t& count) {
  TG_CHECK(dims.size() <= static_cast<size_t>(kMaxReduceDims), "[reduce] the input needs ", dims.size(),
           " strided dims after merging, more than the supported ", kMaxReduceDims,
           "; call contiguous() on the input first");
  StridedSpace s;
  s.ndim = static_cast<int>(dims.size());
  count = 1;
  for (size_t i = 0; i < dims.size(); ++i) {
    s.sizes[i] = dims[i].first;
    s.strides[i] = dims[i].second;
    count *= dims[i].first;
  }
  return s;
}

}  // namespace

std::vector<bool> reduced_dim_mask(const Shape& dims, int64_t ndim, const char* op) {
  std::vector<bool> mask(static_cast<size_t>(ndim), dims.empty());
  std::vector<bool> seen(static_cast<size_t>(std::max<int64_t>(ndim, 1)), false);
  for (int64_t d : dims) {
    const int64_t w = wrap_dim(d, ndim, op);
    TG_CHECK(!seen[static_cast<size_t>(w)], "[", op, "] dim ", w, " appears multiple times in the list of dims");
    seen[static_cast<size_t>(w)] = true;
    if (ndim > 0) mask[static_cast<size_t>(w)] = true;
  }
  return mask;
}

Shape reduced_sizes(const Shape& sizes, const std::vector<bool>& mask, bool keepdim) {
  Shape out;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (!mask[i]) out.push_back(sizes[i]);
    else if (keepdim) out.push_back(1);
  }
  return out;
}

ReducePlan make_reduce_plan(const Shape& sizes, const Shape& strides, const std::vector<bool>& mask,
                            bool logical_order) {
  DimList kept, reduced;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] == 1) continue;  // contributes nothing to either index
    (mask[i] ? reduced : kept).emplace_back(sizes[i], strides[i]);
  }
  if (!logical_order) {
    std::stable_sort(reduced.begin(), reduced.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  }
  ReducePlan plan;
  plan.kept = to_space(merge_dims(kept), plan.n_out);
  plan.reduced = to_space(merge_dims(reduced), plan.n_red);
  return plan;
}

}  // namespace tg
