// Window geometry shared by the CPU and CUDA pooling kernels, for 1, 2 or 3 spatial dims.
#pragma once

#include <cstdint>
#include <limits>

#include "tensor/half.h"
#include "tensor/hd.h"

namespace tg {

// Which pooling a PoolGeometry describes.
enum class PoolMode : int { Max, Avg, Adaptive };

// Sizes, window parameters and strides of one pooling over [N, C, D, H, W]. Fewer spatial dims are
// the trailing ones: a 2-D pooling has D = OD = 1, a 1-D one also H = OH = 1, so one loop serves all.
struct PoolGeometry {
  PoolMode mode = PoolMode::Max;
  int64_t N = 0, C = 0;
  int64_t in[3] = {1, 1, 1}, out[3] = {1, 1, 1};  // input and output extents (D, H, W)
  int64_t k[3] = {1, 1, 1}, s[3] = {1, 1, 1}, p[3] = {0, 0, 0}, dil[3] = {1, 1, 1};
  bool count_include_pad = true;
  int64_t divisor_override = 0;  // 0: none
  int64_t sN = 0, sC = 0, sx[3] = {0, 0, 0};  // input strides (forward) or grad strides (backward)

  TG_HD int64_t in_plane() const { return in[0] * in[1] * in[2]; }
  TG_HD int64_t out_plane() const { return out[0] * out[1] * out[2]; }
  TG_HD int64_t out_numel() const { return N * C * out_plane(); }
  TG_HD int64_t in_numel() const { return N * C * in_plane(); }
};

// The averaging window [lo[i], hi[i]) per dim of one output position, clipped to the input, and its divisor.
struct AvgWindow {
  int64_t lo[3], hi[3], divisor;
};

// Avg/Adaptive windows as PyTorch's avg_pool{1,2,3}d and adaptive_avg_pool{1,2,3}d define them.
TG_HD AvgWindow avg_window(const PoolGeometry& g, const int64_t (&o)[3]) {
  AvgWindow a{};
  int64_t padded = 1, inside = 1;
  for (int i = 0; i < 3; ++i) {
    if (g.mode == PoolMode::Adaptive) {
      a.lo[i] = o[i] * g.in[i] / g.out[i];
      a.hi[i] = ((o[i] + 1) * g.in[i] + g.out[i] - 1) / g.out[i];
    } else {
      const int64_t lo = o[i] * g.s[i] - g.p[i];
      const int64_t hi = lo + g.k[i] < g.in[i] + g.p[i] ? lo + g.k[i] : g.in[i] + g.p[i];
      padded *= hi - lo;
      a.lo[i] = lo > 0 ? lo : 0;
      a.hi[i] = hi < g.in[i] ? hi : g.in[i];
    }
    inside *= a.hi[i] - a.lo[i];
  }
  if (g.mode == PoolMode::Adaptive) a.divisor = inside;
  else if (g.divisor_override != 0) a.divisor = g.divisor_override;
  else a.divisor = g.count_include_pad ? padded : inside;
  return a;
}

// The output position (od, oh, ow) and (n, c) of flat output index i (contiguous [N, C, OD, OH, OW]).
TG_HD void unflatten_output(const PoolGeometry& g, int64_t i, int64_t& n, int64_t& c, int64_t (&o)[3]) {
  o[2] = i % g.out[2];
  i /= g.out[2];
  o[1] = i % g.out[1];
  i /= g.out[1];
  o[0] = i % g.out[0];
  i /= g.out[0];
  c = i % g.C;
  n = i / g.C;
}

// The maximum over the window of output o in `plane` (strided by g.sx) and its flat input position
// (d * H + h) * W + w; `best` comes in as -inf. NaN wins and ends the search, as in PyTorch.
template <typename T>
TG_HD void max_window(const PoolGeometry& g, const T* plane, const int64_t (&o)[3], T& best, int64_t& best_i) {
  best_i = -1;
  for (int64_t a = 0; a < g.k[0]; ++a) {
    const int64_t d = o[0] * g.s[0] - g.p[0] + a * g.dil[0];
    if (d < 0 || d >= g.in[0]) continue;
    for (int64_t b = 0; b < g.k[1]; ++b) {
      const int64_t h = o[1] * g.s[1] - g.p[1] + b * g.dil[1];
      if (h < 0 || h >= g.in[1]) continue;
      for (int64_t c = 0; c < g.k[2]; ++c) {
        const int64_t w = o[2] * g.s[2] - g.p[2] + c * g.dil[2];
        if (w < 0 || w >= g.in[2]) continue;
        const T v = plane[d * g.sx[0] + h * g.sx[1] + w * g.sx[2]];
        const bool nan = !(v == v);
        if (best_i < 0 || v > best || nan) {
          best = v;
          best_i = (d * g.in[1] + h) * g.in[2] + w;
          if (nan) return;
        }
      }
    }
  }
}

// The mean over the averaging window of output o in `plane` (strided by g.sx), summed in float for
// 16-bit input (a bfloat16 running sum of a few values of mixed sign can lose every digit).
template <typename T>
TG_HD T avg_value(const PoolGeometry& g, const T* plane, const int64_t (&o)[3]) {
  using Acc = acc_type<T>;
  const AvgWindow win = avg_window(g, o);
  Acc s = 0;
  for (int64_t d = win.lo[0]; d < win.hi[0]; ++d)
    for (int64_t h = win.lo[1]; h < win.hi[1]; ++h)
      for (int64_t w = win.lo[2]; w < win.hi[2]; ++w)
        s += static_cast<Acc>(plane[d * g.sx[0] + h * g.sx[1] + w * g.sx[2]]);
  return static_cast<T>(s / static_cast<Acc>(win.divisor));
}

// Adds grad / divisor to every element of the averaging window of output o in the contiguous
// input-gradient plane gi, through `add(pointer, value)` (a plain += on the CPU, an atomic on CUDA).
// Output element i of the pooling (and, for max pooling, its argmax in the input plane): what the
// CPU loop and the CUDA kernel each compute per element.
template <typename T>
TG_HD void pool_output(const PoolGeometry& g, const T* x, T* out, int64_t* idx, int64_t i) {
  int64_t n, c, o[3];
  unflatten_output(g, i, n, c, o);
  const T* plane = x + n * g.sN + c * g.sC;
  if (g.mode == PoolMode::Max) {
    T best = -std::numeric_limits<T>::infinity();
    max_window(g, plane, o, best, idx[i]);
    out[i] = best;
  } else {
    out[i] = avg_value(g, plane, o);
  }
}

template <typename T, typename Add>
TG_HD void avg_spread(const PoolGeometry& g, T grad, const int64_t (&o)[3], T* gi, Add add) {
  const AvgWindow win = avg_window(g, o);
  const T v = grad / static_cast<T>(win.divisor);
  for (int64_t d = win.lo[0]; d < win.hi[0]; ++d)
    for (int64_t h = win.lo[1]; h < win.hi[1]; ++h)
      for (int64_t w = win.lo[2]; w < win.hi[2]; ++w) add(gi + (d * g.in[1] + h) * g.in[2] + w, v);
}

}  // namespace tg
