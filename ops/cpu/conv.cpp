// Convolutions on the CPU as im2col + GEMM (the GEMM of ops/gemm.h: OpenBLAS or Eigen), one sample
// and group at a time; a 1x1 kernel with stride 1 and no padding reads the input as the matrix.
#include <atomic>
#include <cstring>
#include <vector>

#include "ops/conv_kernels.h"
#include "ops/gemm.h"

namespace tg {
namespace {

// Sizes of one convolution: input [N, C, H, W], weight [O, Cg, kH, kW], output [N, O, Ho, Wo].
struct Geometry {
  int64_t n, c, h, w, o, cg, og, kh, kw, ho, wo, groups;
  int64_t k() const { return cg * kh * kw; }       // rows of the column matrix
  int64_t p() const { return ho * wo; }            // output pixels
  int64_t in_group() const { return cg * h * w; }  // elements of one group of one input sample
};

Geometry geometry(const Shape& x, const Shape& w, const Shape& y, const Conv2dParams& p) {
  return {x[0], x[1], x[2], x[3], w[0], w[1], w[0] / p.groups, w[2], w[3], y[2], y[3], p.groups};
}

bool is_pointwise(const Geometry& g, const Conv2dParams& p) {
  return g.kh == 1 && g.kw == 1 && p.stride[0] == 1 && p.stride[1] == 1 && p.padding[0] == 0 && p.padding[1] == 0;
}

// col[(c*kh + i)*kw + j, oh*Wo + ow] = x[c, oh*sh - ph + i*dh, ow*sw - pw + j*dw] (0 outside).
template <typename T>
void im2col(const T* x, const Geometry& g, const Conv2dParams& p, T* col) {
  const int64_t np = g.p();
  for (int64_t c = 0; c < g.cg; ++c)
    for (int64_t i = 0; i < g.kh; ++i)
      for (int64_t j = 0; j < g.kw; ++j) {
        T* dst = col + ((c * g.kh + i) * g.kw + j) * np;
        for (int64_t oh = 0; oh < g.ho; ++oh) {
          const int64_t ih = oh * p.stride[0] - p.padding[0] + i * p.dilation[0];
          T* row = dst + oh * g.wo;
          if (ih < 0 || ih >= g.h) {
            std::fill(row, row + g.wo, T(0));
            continue;
          }
          const T* src = x + (c * g.h + ih) * g.w;
          for (int64_t ow = 0; ow < g.wo; ++ow) {
            const int64_t iw = ow * p.stride[1] - p.padding[1] + j * p.dilation[1];
            row[ow] = (iw >= 0 && iw < g.w) ? src[iw] : T(0);
          }
        }
      }
}

// The adjoint of im2col: adds every column entry back into its input position.
template <typename T>
void col2im_add(const T* col, const Geometry& g, const Conv2dParams& p, T* x) {
  const int64_t np = g.p();
  for (int64_t c = 0; c < g.cg; ++c)
    for (int64_t i = 0; i < g.kh; ++i)
      for (int64_t j = 0; j < g.kw; ++j) {
        const T* src = col + ((c * g.kh + i) * g.kw + j) * np;
        for (int64_t oh = 0; oh < g.ho; ++oh) {
          const int64_t ih = oh * p.stride[0] - p.padding[0] + i * p.dilation[0];
          if (ih < 0 || ih >= g.h) continue;
          T* dst = x + (c * g.h + ih) * g.w;
          const T* row = src + oh * g.wo;
          for (int64_t ow = 0; ow < g.wo; ++ow) {
            const int64_t iw = ow * p.stride[1] - p.padding[1] + j * p.dilation[1];
            if (iw >= 0 && iw < g.w) dst[iw] += row[ow];
          }
        }
      }
}

// out[n, m] (+)= op(a)[n, k] @ op(b)[k, m], all row-major with the given leading dimensions.
void gemm(DType dtype, int64_t n, int64_t m, int64_t k, const void* a, bool ta, int64_t lda, const void* b, bool tb,
          int64_t ldb, void* out, int64_t ldc, bool accumulate) {
  Gemm gm;
  gm.dtype = dtype;
  gm.device = kCPU;
  gm.n = n;
  gm.m = m;
  gm.k = k;
  gm.a = {a, ta, lda, 0};
  gm.b = {b, tb, ldb, 0};
  gm.out = out;
  gm.ldc = ldc;
  gm.out_batch_stride = n * m;
  gm.beta = accumulate ? 1.0 : 0.0;
  cpu_gemm(gm);
}

void check_packed(const Tensor& t) {
  TG_CHECK(t.is_contiguous(), "[conv2d] internal error: kernels expect contiguous operands, got strides ",
           shape_str(t.strides()));
}

std::atomic<bool> g_onednn{false};

// True when oneDNN takes this call: float32 with a non-empty batch.
bool onednn_takes(const Tensor& t, const Tensor& batch) {
  return cpu_conv_onednn() && t.dtype() == kFloat32 && batch.numel() > 0;
}

}  // namespace

void set_cpu_conv_onednn(bool on) {
#ifdef TG_WITH_DNNL
  g_onednn.store(on);
#else
  TG_CHECK(!on, "[conv2d] this build has no oneDNN");
#endif
}

bool cpu_conv_onednn() { return g_onednn.load(); }

bool cpu_conv_onednn_available() {
#ifdef TG_WITH_DNNL
  return true;
#else
  return false;
#endif
}

void cpu_conv2d_forward(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& y, const Conv2dParams& p) {
  check_packed(x);
  check_packed(w);
#ifdef TG_WITH_DNNL
  if (onednn_takes(x, x)) return onednn_conv2d_forward(x, w, bias, y, p);
#endif
  const Geometry g = geometry(x.sizes(), w.sizes(), y.sizes(), p);
  const bool pointwise = is_pointwise(g, p);
  TG_DISPATCH_FLOATING(x.dtype(), "conv2d", [&] {
    const scalar_t* px = x.data_ptr<scalar_t>();
    const scalar_t* pw = w.data_ptr<scalar_t>();
    scalar_t* py = y.data_ptr<scalar_t>();
    std::vector<scalar_t> col(pointwise ? 0 : static_cast<size_t>(g.k() * g.p()));
    for (int64_t n = 0; n < g.n; ++n)
      for (int64_t gi = 0; gi < g.groups; ++gi) {
        const scalar_t* xg = px + n * g.c * g.h * g.w + gi * g.in_group();
        if (!pointwise) im2col(xg, g, p, col.data());
        gemm(x.dtype(), g.og, g.p(), g.k(), pw + gi * g.og * g.k(), false, g.k(), pointwise ? xg : col.data(), false,
             g.p(), py + (n * g.o + gi * g.og) * g.p(), g.p(), false);
      }
    if (bias.defined()) {
      const scalar_t* pb = bias.data_ptr<scalar_t>();
      const int64_t bs = bias.strides()[0];
      for (int64_t n = 0; n < g.n; ++n)
        for (int64_t o = 0; o < g.o; ++o) {
          scalar_t* row = py + (n * g.o + o) * g.p();
          const scalar_t b = pb[o * bs];
          for (int64_t i = 0; i < g.p(); ++i) row[i] += b;
        }
    }
  });
}

void cpu_conv2d_backward_input(const Tensor& gy, const Tensor& w, const Tensor& gx, const Conv2dParams& p) {
  check_packed(gy);
  check_packed(w);
#ifdef TG_WITH_DNNL
  if (onednn_takes(gy, gx)) return onednn_conv2d_backward_input(gy, w, gx, p);
#endif
  const Geometry g = geometry(gx.sizes(), w.sizes(), gy.sizes(), p);
  const bool pointwise = is_pointwise(g, p);
  TG_DISPATCH_FLOATING(gy.dtype(), "conv2d_backward_input", [&] {
    const scalar_t* pgy = gy.data_ptr<scalar_t>();
    const scalar_t* pw = w.data_ptr<scalar_t>();
    scalar_t* pgx = gx.data_ptr<scalar_t>();
    if (!pointwise) std::fill(pgx, pgx + gx.numel(), scalar_t(0));
    std::vector<scalar_t> col(pointwise ? 0 : static_cast<size_t>(g.k() * g.p()));
    for (int64_t n = 0; n < g.n; ++n)
      for (int64_t gi = 0; gi < g.groups; ++gi) {
        scalar_t* xg = pgx + n * g.c * g.h * g.w + gi * g.in_group();
        // col [K, P] = W_g^T [K, Og] @ gy_g [Og, P]
        gemm(gy.dtype(), g.k(), g.p(), g.og, pw + gi * g.og * g.k(), true, g.k(),
             pgy + (n * g.o + gi * g.og) * g.p(), false, g.p(), pointwise ? xg : col.data(), g.p(), false);
        if (!pointwise) col2im_add(col.data(), g, p, xg);
      }
  });
}

void cpu_conv2d_backward_weight(const Tensor& gy, const Tensor& x, const Tensor& gw, const Conv2dParams& p) {
  check_packed(gy);
  check_packed(x);
#ifdef TG_WITH_DNNL
  if (onednn_takes(gy, x)) return onednn_conv2d_backward_weight(gy, x, gw, p);
#endif
  const Geometry g = geometry(x.sizes(), gw.sizes(), gy.sizes(), p);
  const bool pointwise = is_pointwise(g, p);
  TG_DISPATCH_FLOATING(gy.dtype(), "conv2d_backward_weight", [&] {
    const scalar_t* pgy = gy.data_ptr<scalar_t>();
    const scalar_t* px = x.data_ptr<scalar_t>();
    scalar_t* pgw = gw.data_ptr<scalar_t>();
    std::fill(pgw, pgw + gw.numel(), scalar_t(0));
    std::vector<scalar_t> col(pointwise ? 0 : static_cast<size_t>(g.k() * g.p()));
    for (int64_t n = 0; n < g.n; ++n)
      for (int64_t gi = 0; gi < g.groups; ++gi) {
        const scalar_t* xg = px + n * g.c * g.h * g.w + gi * g.in_group();
        if (!pointwise) im2col(xg, g, p, col.data());
        // gw_g [Og, K] += gy_g [Og, P] @ col^T [P, K]
        gemm(gy.dtype(), g.og, g.k(), g.p(), pgy + (n * g.o + gi * g.og) * g.p(), false, g.p(),
             pointwise ? xg : col.data(), true, g.p(), pgw + gi * g.og * g.k(), g.k(), true);
      }
  });
}

}  // namespace tg
