// 2-D and 3-D convolutions on the CPU as im2col + GEMM (the GEMM of ops/linalg/gemm.h: OpenBLAS or Eigen), one sample
// and group at a time; a 1x1 kernel with stride 1 and no padding reads the input as the matrix.
#include <atomic>
#include <cstring>
#include <vector>

#include "ops/conv/conv_kernels.h"
#include "ops/linalg/gemm.h"

namespace tg {
namespace {

// Sizes of one convolution: input [N, C, D, H, W], weight [O, Cg, kD, kH, kW], output [N, O, Do, Ho, Wo]
// (a 2-D one has D = kD = Do = 1), and the window parameters per spatial dim (D, H, W).
struct Geometry {
  int64_t n, c, o, cg, og, groups;
  int64_t in[3], k[3], out[3], s[3], pad[3], dil[3];
  int64_t kernel() const { return k[0] * k[1] * k[2]; }
  int64_t k_rows() const { return cg * kernel(); }               // rows of the column matrix
  int64_t p() const { return out[0] * out[1] * out[2]; }         // output pixels
  int64_t in_plane() const { return in[0] * in[1] * in[2]; }
  int64_t in_group() const { return cg * in_plane(); }  // elements of one group of one input sample
};

Geometry geometry(const Shape& x, const Shape& w, const Shape& y, const ConvParams& p) {
  Geometry g{};
  g.n = x[0], g.c = x[1], g.o = w[0], g.cg = w[1], g.og = w[0] / p.groups, g.groups = p.groups;
  const int off = 3 - p.spatial;
  for (int i = 0; i < 3; ++i) {
    const bool used = i >= off;
    const size_t at = static_cast<size_t>(2 + i - off);
    g.in[i] = used ? x[at] : 1;
    g.k[i] = used ? w[at] : 1;
    g.out[i] = used ? y[at] : 1;
    g.s[i] = used ? p.stride[static_cast<size_t>(i - off)] : 1;
    g.pad[i] = used ? p.padding[static_cast<size_t>(i - off)] : 0;
    g.dil[i] = used ? p.dilation[static_cast<size_t>(i - off)] : 1;
  }
  return g;
}

bool is_pointwise(const Geometry& g) {
  for (int i = 0; i < 3; ++i)
    if (g.k[i] != 1 || g.s[i] != 1 || g.pad[i] != 0) return false;
  return true;
}

// Calls f(at, base, len, w0) once per output row (od, oh) of each column-matrix row
// ((c * kD + a) * kH + i) * kW + j: `at` is where that stretch of Wo entries starts in the column
// matrix, `base` the offset of input row (c, id, ih) or -1 when the row lies in the zero padding,
// len = Wo, and w0 the input column read by ow = 0 (column ow reads w0 + ow * stride_w).
// im2col copies through it, col2im adds back.
template <typename F>
void for_each_column_entry(const Geometry& g, F f) {
  const int64_t np = g.p();
  for (int64_t c = 0; c < g.cg; ++c)
    for (int64_t a = 0; a < g.k[0]; ++a)
      for (int64_t i = 0; i < g.k[1]; ++i)
        for (int64_t j = 0; j < g.k[2]; ++j) {
          const int64_t row = ((c * g.k[0] + a) * g.k[1] + i) * g.k[2] + j;
          int64_t col = row * np;
          for (int64_t od = 0; od < g.out[0]; ++od) {
            const int64_t id = od * g.s[0] - g.pad[0] + a * g.dil[0];
            const bool d_in = id >= 0 && id < g.in[0];
            for (int64_t oh = 0; oh < g.out[1]; ++oh) {
              const int64_t ih = oh * g.s[1] - g.pad[1] + i * g.dil[1];
              if (!d_in || ih < 0 || ih >= g.in[1]) {
                f(col, int64_t{-1}, g.out[2], int64_t{0});
                col += g.out[2];
                continue;
              }
              f(col, (c * g.in[0] + id) * g.in[1] * g.in[2] + ih * g.in[2], g.out[2], j * g.dil[2] - g.pad[2]);
              col += g.out[2];
            }
          }
        }
}

// col[row, column] = x[c, id, ih, iw] (0 outside).
template <typename T>
void im2col(const T* x, const Geometry& g, T* col) {
  for_each_column_entry(g, [&](int64_t at, int64_t base, int64_t len, int64_t w0) {
    T* row = col + at;
    if (base < 0) {
      std::fill(row, row + len, T(0));
      return;
    }
    const T* src = x + base;
    for (int64_t ow = 0; ow < len; ++ow) {
      const int64_t iw = ow * g.s[2] + w0;
      row[ow] = (iw >= 0 && iw < g.in[2]) ? src[iw] : T(0);
    }
  });
}

// The adjoint of im2col: adds every column entry back into its input position.
template <typename T>
void col2im_add(const T* col, const Geometry& g, T* x) {
  for_each_column_entry(g, [&](int64_t at, int64_t base, int64_t len, int64_t w0) {
    if (base < 0) return;
    const T* row = col + at;
    T* dst = x + base;
    for (int64_t ow = 0; ow < len; ++ow) {
      const int64_t iw = ow * g.s[2] + w0;
      if (iw >= 0 && iw < g.in[2]) dst[iw] += row[ow];
    }
  });
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
  TG_CHECK(t.is_contiguous(), "[conv] internal error: kernels expect contiguous operands, got strides ",
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
  TG_CHECK(!on, "[conv] this build has no oneDNN");
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

void cpu_conv_forward(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& y, const ConvParams& p) {
  check_packed(x);
  check_packed(w);
#ifdef TG_WITH_DNNL
  if (onednn_takes(x, x)) return onednn_conv_forward(x, w, bias, y, p);
#endif
  const Geometry g = geometry(x.sizes(), w.sizes(), y.sizes(), p);
  const bool pointwise = is_pointwise(g);
  TG_DISPATCH_FLOATING(x.dtype(), "conv2d", [&] {
    const scalar_t* px = x.data_ptr<scalar_t>();
    const scalar_t* pw = w.data_ptr<scalar_t>();
    scalar_t* py = y.data_ptr<scalar_t>();
    std::vector<scalar_t> col(pointwise ? 0 : static_cast<size_t>(g.k_rows() * g.p()));
    for (int64_t n = 0; n < g.n; ++n)
      for (int64_t gi = 0; gi < g.groups; ++gi) {
        const scalar_t* xg = px + n * g.c * g.in_plane() + gi * g.in_group();
        if (!pointwise) im2col(xg, g, col.data());
        gemm(x.dtype(), g.og, g.p(), g.k_rows(), pw + gi * g.og * g.k_rows(), false, g.k_rows(), pointwise ? xg : col.data(), false,
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

void cpu_conv_backward_input(const Tensor& gy, const Tensor& w, const Tensor& gx, const ConvParams& p) {
  check_packed(gy);
  check_packed(w);
#ifdef TG_WITH_DNNL
  if (onednn_takes(gy, gx)) return onednn_conv_backward_input(gy, w, gx, p);
#endif
  const Geometry g = geometry(gx.sizes(), w.sizes(), gy.sizes(), p);
  const bool pointwise = is_pointwise(g);
  TG_DISPATCH_FLOATING(gy.dtype(), "conv2d_backward_input", [&] {
    const scalar_t* pgy = gy.data_ptr<scalar_t>();
    const scalar_t* pw = w.data_ptr<scalar_t>();
    scalar_t* pgx = gx.data_ptr<scalar_t>();
    if (!pointwise) std::fill(pgx, pgx + gx.numel(), scalar_t(0));
    std::vector<scalar_t> col(pointwise ? 0 : static_cast<size_t>(g.k_rows() * g.p()));
    for (int64_t n = 0; n < g.n; ++n)
      for (int64_t gi = 0; gi < g.groups; ++gi) {
        scalar_t* xg = pgx + n * g.c * g.in_plane() + gi * g.in_group();
        // col [K, P] = W_g^T [K, Og] @ gy_g [Og, P]
        gemm(gy.dtype(), g.k_rows(), g.p(), g.og, pw + gi * g.og * g.k_rows(), true, g.k_rows(),
             pgy + (n * g.o + gi * g.og) * g.p(), false, g.p(), pointwise ? xg : col.data(), g.p(), false);
        if (!pointwise) col2im_add(col.data(), g, xg);
      }
  });
}

void cpu_conv_backward_weight(const Tensor& gy, const Tensor& x, const Tensor& gw, const ConvParams& p) {
  check_packed(gy);
  check_packed(x);
#ifdef TG_WITH_DNNL
  if (onednn_takes(gy, x)) return onednn_conv_backward_weight(gy, x, gw, p);
#endif
  const Geometry g = geometry(x.sizes(), gw.sizes(), gy.sizes(), p);
  const bool pointwise = is_pointwise(g);
  TG_DISPATCH_FLOATING(gy.dtype(), "conv2d_backward_weight", [&] {
    const scalar_t* pgy = gy.data_ptr<scalar_t>();
    const scalar_t* px = x.data_ptr<scalar_t>();
    scalar_t* pgw = gw.data_ptr<scalar_t>();
    std::fill(pgw, pgw + gw.numel(), scalar_t(0));
    std::vector<scalar_t> col(pointwise ? 0 : static_cast<size_t>(g.k_rows() * g.p()));
    for (int64_t n = 0; n < g.n; ++n)
      for (int64_t gi = 0; gi < g.groups; ++gi) {
        const scalar_t* xg = px + n * g.c * g.in_plane() + gi * g.in_group();
        if (!pointwise) im2col(xg, g, col.data());
        // gw_g [Og, K] += gy_g [Og, P] @ col^T [P, K]
        gemm(gy.dtype(), g.og, g.k_rows(), g.p(), pgy + (n * g.o + gi * g.og) * g.p(), false, g.p(),
             pointwise ? xg : col.data(), true, g.p(), pgw + gi * g.og * g.k_rows(), g.k_rows(), true);
      }
  });
}

}  // namespace tg
