// Window geometry shared by the CPU and CUDA pooling kernels.
#pragma once

#include <cstdint>

#include "tensor/hd.h"

namespace tg {

// Which pooling a PoolGeometry describes.
enum class PoolMode : int { Max, Avg, Adaptive };

// Sizes, window parameters and the input's strides for one 2-D pooling over [N, C, H, W].
struct PoolGeometry {
  PoolMode mode = PoolMode::Max;
  int64_t N = 0, C = 0, H = 0, W = 0, OH = 0, OW = 0;
  int64_t kh = 1, kw = 1, sh = 1, sw = 1, ph = 0, pw = 0, dh = 1, dw = 1;
  bool count_include_pad = true;
  int64_t sN = 0, sC = 0, sH = 0, sW = 0;  // input strides (forward) or grad strides (backward)

  TG_HD int64_t out_numel() const { return N * C * OH * OW; }
  TG_HD int64_t in_numel() const { return N * C * H * W; }
};

// The averaging window [h0, h1) x [w0, w1) of output (oh, ow), clipped to the input, and its divisor.
struct AvgWindow {
  int64_t h0, h1, w0, w1, divisor;
};

// Avg/Adaptive windows as PyTorch's avg_pool2d and adaptive_avg_pool2d define them.
TG_HD AvgWindow avg_window(const PoolGeometry& g, int64_t oh, int64_t ow) {
  AvgWindow a{};
  if (g.mode == PoolMode::Adaptive) {
    a.h0 = oh * g.H / g.OH;
    a.h1 = ((oh + 1) * g.H + g.OH - 1) / g.OH;
    a.w0 = ow * g.W / g.OW;
    a.w1 = ((ow + 1) * g.W + g.OW - 1) / g.OW;
    a.divisor = (a.h1 - a.h0) * (a.w1 - a.w0);
    return a;
  }
  int64_t h0 = oh * g.sh - g.ph, w0 = ow * g.sw - g.pw;
  int64_t h1 = h0 + g.kh < g.H + g.ph ? h0 + g.kh : g.H + g.ph;
  int64_t w1 = w0 + g.kw < g.W + g.pw ? w0 + g.kw : g.W + g.pw;
  const int64_t padded = (h1 - h0) * (w1 - w0);
  a.h0 = h0 > 0 ? h0 : 0;
  a.w0 = w0 > 0 ? w0 : 0;
  a.h1 = h1 < g.H ? h1 : g.H;
  a.w1 = w1 < g.W ? w1 : g.W;
  a.divisor = g.count_include_pad ? padded : (a.h1 - a.h0) * (a.w1 - a.w0);
  return a;
}

}  // namespace tg
