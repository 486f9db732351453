// max_pool2d, avg_pool2d and adaptive_avg_pool2d: shape rules, CPU loops, CUDA launches, backward.
#include "ops/pool.h"

#include <cmath>
#include <limits>
#include <sstream>

#include "ops/binary.h"
#include "ops/dispatch.h"
#include "ops/factory.h"
#include "ops/join.h"
#include "ops/pool_geometry.h"
#include "ops/view.h"

#ifdef TG_WITH_CUDA
#include "ops/cuda/pool.h"
#endif

namespace tg {
namespace {

// Window parameters as given by the caller (before sizes are known).
struct PoolParams {
  PoolMode mode;
  int64_t kh = 1, kw = 1, sh = 1, sw = 1, ph = 0, pw = 0, dh = 1, dw = 1;
  int64_t oh = 0, ow = 0;  // adaptive output size
  bool ceil_mode = false;
  bool count_include_pad = true;
};

const char* mode_name(PoolMode m) {
  switch (m) {
    case PoolMode::Max: return "max_pool2d";
    case PoolMode::Avg: return "avg_pool2d";
    case PoolMode::Adaptive: return "adaptive_avg_pool2d";
  }
  return "pool2d";
}

// Output length of one pooled dim (PyTorch's pooling_output_shape).
int64_t pooled_size(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil_mode) {
  const int64_t num = in + 2 * p - d * (k - 1) - 1 + (ceil_mode ? s - 1 : 0);
  int64_t out = (num >= 0 ? num / s : -((-num + s - 1) / s)) + 1;
  if (ceil_mode && (out - 1) * s >= in + p) --out;
  return out;
}

// Validates 4-D input sizes and fills the geometry (strides are the input's).
PoolGeometry make_geometry(const PoolParams& p, const Shape& sizes, const Shape& strides) {
  const char* op = mode_name(p.mode);
  TG_CHECK(sizes.size() == 4, "[", op, "] input of shape ", shape_str(sizes),
           " has the wrong rank: expected 3-D [C, H, W] or 4-D [N, C, H, W]");
  PoolGeometry g;
  g.mode = p.mode;
  g.N = sizes[0], g.C = sizes[1], g.H = sizes[2], g.W = sizes[3];
  g.kh = p.kh, g.kw = p.kw, g.sh = p.sh, g.sw = p.sw, g.ph = p.ph, g.pw = p.pw, g.dh = p.dh, g.dw = p.dw;
  g.count_include_pad = p.count_include_pad;
  g.sN = strides[0], g.sC = strides[1], g.sH = strides[2], g.sW = strides[3];
  TG_CHECK(g.C > 0 && g.H > 0 && g.W > 0, "[", op, "] input of shape ", shape_str(sizes),
           " has an empty non-batch dim: expected C, H and W > 0");
  if (p.mode == PoolMode::Adaptive) {
    g.OH = p.oh, g.OW = p.ow;
    return g;
  }
  g.OH = pooled_size(g.H, p.kh, p.sh, p.ph, p.dh, p.ceil_mode);
  g.OW = pooled_size(g.W, p.kw, p.sw, p.pw, p.dw, p.ceil_mode);
  TG_CHECK(g.OH > 0 && g.OW > 0, "[", op, "] input of shape ", shape_str(sizes), " is too small for kernel [",
           p.kh, ", ", p.kw, "] (dilation [", p.dh, ", ", p.dw, "], padding [", p.ph, ", ", p.pw,
           "]): output would be [", g.OH, ", ", g.OW, "]");
  return g;
}

template <typename T>
void pool_forward_cpu(const PoolGeometry& g, const T* x, T* out, int64_t* idx) {
  int64_t i = 0;
  for (int64_t n = 0; n < g.N; ++n)
    for (int64_t c = 0; c < g.C; ++c) {
      const T* plane = x + n * g.sN + c * g.sC;
      for (int64_t oh = 0; oh < g.OH; ++oh)
        for (int64_t ow = 0; ow < g.OW; ++ow, ++i) {
          if (g.mode == PoolMode::Max) {
            T best = -std::numeric_limits<T>::infinity();
            int64_t best_i = -1;
            bool done = false;
            for (int64_t a = 0; a < g.kh && !done; ++a) {
              const int64_t h = oh * g.sh - g.ph + a * g.dh;
              if (h < 0 || h >= g.H) continue;
              for (int64_t b = 0; b < g.kw; ++b) {
                const int64_t w = ow * g.sw - g.pw + b * g.dw;
                if (w < 0 || w >= g.W) continue;
                const T v = plane[h * g.sH + w * g.sW];
                if (best_i < 0 || v > best || std::isnan(v)) {
                  best = v;
                  best_i = h * g.W + w;
                  if (std::isnan(v)) { done = true; break; }
                }
              }
            }
            out[i] = best;
            idx[i] = best_i;
          } else {
            const AvgWindow win = avg_window(g, oh, ow);
            T s = 0;
            for (int64_t h = win.h0; h < win.h1; ++h)
              for (int64_t w = win.w0; w < win.w1; ++w) s += plane[h * g.sH + w * g.sW];
            out[i] = s / static_cast<T>(win.divisor);
          }
        }
    }
}

template <typename T>
void avg_backward_cpu(const PoolGeometry& g, const T* grad, T* gi) {
  std::fill(gi, gi + g.in_numel(), T(0));
  for (int64_t n = 0; n < g.N; ++n)
    for (int64_t c = 0; c < g.C; ++c) {
      T* plane = gi + (n * g.C + c) * g.H * g.W;
      for (int64_t oh = 0; oh < g.OH; ++oh)
        for (int64_t ow = 0; ow < g.OW; ++ow) {
          const AvgWindow win = avg_window(g, oh, ow);
          const T v = grad[n * g.sN + c * g.sC + oh * g.sH + ow * g.sW] / static_cast<T>(win.divisor);
          for (int64_t h = win.h0; h < win.h1; ++h)
            for (int64_t w = win.w0; w < win.w1; ++w) plane[h * g.W + w] += v;
        }
    }
}

std::string params_str(const PoolParams& p) {
  std::ostringstream s;
  if (p.mode == PoolMode::Adaptive) {
    s << "output_size=[" << p.oh << ", " << p.ow << "]";
    return s.str();
  }
  s << "kernel=[" << p.kh << ", " << p.kw << "], stride=[" << p.sh << ", " << p.sw << "], padding=[" << p.ph << ", "
    << p.pw << "]";
  if (p.mode == PoolMode::Max) s << ", dilation=[" << p.dh << ", " << p.dw << "]";
  if (p.mode == PoolMode::Avg) s << ", count_include_pad=" << (p.count_include_pad ? "true" : "false");
  s << ", ceil_mode=" << (p.ceil_mode ? "true" : "false");
  return s.str();
}

class AvgPoolBackwardOp;

// Forward pooling over a 4-D input; Max has a second output, the int64 indices.
class Pool2dOp final : public Op {
 public:
  explicit Pool2dOp(PoolParams p) : p_(p) {}
  const OpSchema& schema() const override {
    static const OpSchema max{.name = "max_pool2d_with_indices"};
    static const OpSchema avg{.name = "avg_pool2d"};
    static const OpSchema ada{.name = "adaptive_avg_pool2d"};
    return p_.mode == PoolMode::Max ? max : p_.mode == PoolMode::Avg ? avg : ada;
  }
  std::vector<TensorMeta> infer(const TensorList& in) const override {
    check_floating(mode_name(p_.mode), in[0]);
    const PoolGeometry g = make_geometry(p_, in[0].sizes(), in[0].strides());
    const Shape out{g.N, g.C, g.OH, g.OW};
    std::vector<TensorMeta> metas{contiguous_meta(out, in[0].dtype(), in[0].device())};
    if (p_.mode == PoolMode::Max) metas.push_back(contiguous_meta(out, kInt64, in[0].device()));
    return metas;
  }
  void eval(const TensorList& in, TensorList& out) const override {
    const PoolGeometry g = make_geometry(p_, in[0].sizes(), in[0].strides());
    Tensor* idx = p_.mode == PoolMode::Max ? &out[1] : nullptr;
#ifdef TG_WITH_CUDA
    if (out[0].is_cuda()) {
      cuda::pool2d_forward(g, in[0], out[0], idx);
      return;
    }
#endif
    TG_DISPATCH_FLOATING(in[0].dtype(), mode_name(p_.mode), [&] {
      pool_forward_cpu<scalar_t>(g, in[0].data_ptr<scalar_t>(), out[0].data_ptr<scalar_t>(),
                                 idx ? idx->data_ptr<int64_t>() : nullptr);
    });
  }
  TensorList backward(const BackwardContext& ctx, const TensorList& grads) const override;
  SaveSpec saves() const override { return {.inputs = false, .outputs = p_.mode == PoolMode::Max}; }
  std::string attrs() const override { return params_str(p_); }
  const PoolParams& params() const { return p_; }

 private:
  PoolParams p_;
};

// grad_input [N, C, H, W] of avg/adaptive pooling from grad_output [N, C, OH, OW]; input 1 is
// unused data-wise, present so the sizes of the pooled input are known (it is saved as metadata only).
class AvgPoolBackwardOp final : public Op {
 public:
  AvgPoolBackwardOp(PoolParams p, Shape input_sizes) : p_(p), in_sizes_(std::move(input_sizes)) {}
  const OpSchema& schema() const override {
    static const OpSchema avg{.name = "avg_pool2d_backward"};
    static const OpSchema ada{.name = "adaptive_avg_pool2d_backward"};
    return p_.mode == PoolMode::Avg ? avg : ada;
  }
  std::vector<TensorMeta> infer(const TensorList& in) const override {
    const PoolGeometry g = geometry(in[0]);
    const Shape expected{g.N, g.C, g.OH, g.OW};
    TG_CHECK(in[0].sizes() == expected, "[", schema().name, "] grad_output of shape ", shape_str(in[0].sizes()),
             " does not match the pooled shape ", shape_str(expected));
    return single_output(contiguous_meta(in_sizes_, in[0].dtype(), in[0].device()));
  }
  void eval(const TensorList& in, TensorList& out) const override {
    const PoolGeometry g = geometry(in[0]);
#ifdef TG_WITH_CUDA
    if (out[0].is_cuda()) {
      cuda::avg_pool2d_backward(g, in[0], out[0]);
      return;
    }
#endif
    TG_DISPATCH_FLOATING(in[0].dtype(), schema().name.data(),
                         [&] { avg_backward_cpu<scalar_t>(g, in[0].data_ptr<scalar_t>(), out[0].data_ptr<scalar_t>()); });
  }
  // Linear in grad_output; its adjoint is the forward pooling.
  TensorList backward(const BackwardContext&, const TensorList& grads) const override {
    return {call_op<Pool2dOp>({grads[0]}, p_)};
  }
  SaveSpec saves() const override { return {.inputs = false, .outputs = false}; }
  std::string attrs() const override { return params_str(p_) + ", input_sizes=" + shape_str(in_sizes_); }

 private:
  // Geometry over the pooled input's sizes, with grad_output's strides.
  PoolGeometry geometry(const Tensor& grad) const {
    check_floating(schema().name.data(), grad);
    TG_CHECK(grad.dim() == 4, "[", schema().name, "] grad_output of shape ", shape_str(grad.sizes()), " is not 4-D");
    return make_geometry(p_, in_sizes_, grad.strides());
  }
  PoolParams p_;
  Shape in_sizes_;
};

TensorList Pool2dOp::backward(const BackwardContext& ctx, const TensorList& grads) const {
  const Tensor& g = grads[0];
  if (!g.defined()) return {Tensor()};
  const TensorMeta& m = ctx.input_meta(0);
  if (p_.mode != PoolMode::Max) return {call_op<AvgPoolBackwardOp>({g}, p_, m.sizes)};
  // Max: scatter-add each gradient to the flat position of its maximum (index_add is differentiable).
  const int64_t N = m.sizes[0], C = m.sizes[1], HW = m.sizes[2] * m.sizes[3];
  const Tensor idx = ctx.output(1);
  const Tensor base = mul(arange(N * C, TensorOptions{kInt64, g.device()}), HW).view({N, C, 1, 1});
  const Tensor flat = add(idx, base).reshape({-1});
  Tensor gi = index_add(zeros({N * C * HW}, TensorOptions{g.dtype(), g.device()}), 0, flat, g.reshape({-1}));
  return {gi.view(m.sizes)};
}

// Expands a 1- or 2-element list to (h, w); `what` names it in errors.
std::pair<int64_t, int64_t> pair_of(const char* op, const char* what, const Shape& v, int64_t min) {
  TG_CHECK(v.size() == 1 || v.size() == 2, "[", op, "] ", what, " must have 1 or 2 elements, got ", shape_str(v));
  const int64_t a = v[0], b = v.size() == 2 ? v[1] : v[0];
  TG_CHECK(a >= min && b >= min, "[", op, "] ", what, " ", shape_str(v), " must be >= ", min);
  return {a, b};
}

PoolParams window_params(PoolMode mode, const Shape& kernel, const Shape& stride, const Shape& padding,
                         const Shape& dilation, bool ceil_mode) {
  const char* op = mode_name(mode);
  PoolParams p{.mode = mode};
  std::tie(p.kh, p.kw) = pair_of(op, "kernel_size", kernel, 1);
  std::tie(p.sh, p.sw) = stride.empty() ? std::pair{p.kh, p.kw} : pair_of(op, "stride", stride, 1);
  std::tie(p.ph, p.pw) = pair_of(op, "padding", padding, 0);
  std::tie(p.dh, p.dw) = pair_of(op, "dilation", dilation, 1);
  TG_CHECK(p.ph <= p.kh / 2 && p.pw <= p.kw / 2, "[", op, "] padding ", shape_str(padding),
           " should be at most half of kernel_size ", shape_str(kernel));
  p.ceil_mode = ceil_mode;
  return p;
}

// Runs a pooling op on a 3-D or 4-D input, restoring the rank of the input.
TensorList run_pool(const PoolParams& p, const Tensor& input) {
  TG_CHECK(input.defined(), "[", mode_name(p.mode), "] got an undefined tensor");
  TG_CHECK(input.dim() == 3 || input.dim() == 4, "[", mode_name(p.mode), "] input of shape ",
           shape_str(input.sizes()), " has the wrong rank: expected 3-D [C, H, W] or 4-D [N, C, H, W]");
  const bool batched = input.dim() == 4;
  TensorList out = dispatch(std::make_shared<const Pool2dOp>(p), {batched ? input : input.unsqueeze(0)});
  if (!batched)
    for (Tensor& t : out) t = t.squeeze(0);
  return out;
}

}  // namespace

std::pair<Tensor, Tensor> max_pool2d_with_indices(const Tensor& input, const Shape& kernel, const Shape& stride,
                                                  const Shape& padding, const Shape& dilation, bool ceil_mode) {
  TensorList out = run_pool(window_params(PoolMode::Max, kernel, stride, padding, dilation, ceil_mode), input);
  return {out[0], out[1]};
}

Tensor max_pool2d(const Tensor& input, const Shape& kernel, const Shape& stride, const Shape& padding,
                  const Shape& dilation, bool ceil_mode) {
  return max_pool2d_with_indices(input, kernel, stride, padding, dilation, ceil_mode).first;
}

Tensor avg_pool2d(const Tensor& input, const Shape& kernel, const Shape& stride, const Shape& padding, bool ceil_mode,
                  bool count_include_pad) {
  PoolParams p = window_params(PoolMode::Avg, kernel, stride, padding, {1}, ceil_mode);
  p.count_include_pad = count_include_pad;
  return run_pool(p, input)[0];
}

Tensor adaptive_avg_pool2d(const Tensor& input, const Shape& output_size) {
  PoolParams p{.mode = PoolMode::Adaptive};
  std::tie(p.oh, p.ow) = pair_of("adaptive_avg_pool2d", "output_size", output_size, 1);
  return run_pool(p, input)[0];
}

}  // namespace tg
