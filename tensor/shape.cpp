#include "tensor/shape.h"

#include <algorithm>
#include <numeric>

#include "tensor/check.h"

namespace tg {

int64_t shape_numel(const Shape& sizes) {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return n;
}

Shape contiguous_strides(const Shape& sizes) {
  Shape strides(sizes.size());
  int64_t acc = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    strides[i] = acc;
    acc *= std::max<int64_t>(sizes[i], 1);
  }
  return strides;
}

bool is_contiguous_layout(const Shape& sizes, const Shape& strides) {
  int64_t expected = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    if (sizes[i] == 0) return true;
    if (sizes[i] == 1) continue;
    if (strides[i] != expected) return false;
    expected *= sizes[i];
  }
  return true;
}

int64_t storage_span(const Shape& sizes, const Shape& strides) {
  int64_t span = 1;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] == 0) return 0;
    span += (sizes[i] - 1) * strides[i];
  }
  return span;
}

std::string shape_str(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(s[i]);
  }
  return out + "]";
}

int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op) {
  const int64_t n = std::max<int64_t>(ndim, 1);  // a 0-dim tensor accepts dim 0 and -1
  TG_CHECK(dim >= -n && dim < n, "[", op, "] dimension out of range (expected to be in range of [",
           -n, ", ", n - 1, "], but got ", dim, ")");
  return dim < 0 ? dim + n : dim;
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  const size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    const int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    const int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    TG_CHECK(da == db || da == 1 || db == 1, "[", op, "] shapes ", shape_str(a), " and ", shape_str(b),
             " cannot broadcast");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

Shape broadcast_strides(const Shape& sizes, const Shape& strides, const Shape& target) {
  Shape out(target.size(), 0);
  const size_t lead = target.size() - sizes.size();
  for (size_t i = 0; i < sizes.size(); ++i) out[lead + i] = sizes[i] == 1 ? 0 : strides[i];
  return out;
}

bool has_internal_overlap(const Shape& sizes, const Shape& strides) {
  // Each dim's stride must clear the extent of all smaller-stride dims. Dims whose strides fall
  // from first to last (the usual layout) are checked in place; any other order is sorted first.
  int64_t row_major_extent = 0;
  bool row_major = true;
  for (size_t i = sizes.size(); i-- > 0;) {
    if (sizes[i] <= 1) continue;
    if (strides[i] <= row_major_extent) {
      row_major = false;
      break;
    }
    row_major_extent += strides[i] * (sizes[i] - 1);
  }
  if (row_major) return false;
  std::vector<size_t> order;
  for (size_t i = 0; i < sizes.size(); ++i)
    if (sizes[i] > 1) order.push_back(i);
  std::sort(order.begin(), order.end(), [&](size_t x, size_t y) { return strides[x] < strides[y]; });
  int64_t extent = 0;  // max offset reachable with the dims seen so far
  for (size_t i : order) {
    if (strides[i] <= extent) return true;
    extent += strides[i] * (sizes[i] - 1);
  }
  return false;
}

}  // namespace tg
