// Max, average and adaptive average pooling over 1, 2 or 3 spatial dims: shape rules, CPU loops,
// CUDA launches, backward.
#include "ops/conv/pool.h"

#include <array>
#include <cmath>
#include <limits>
#include <optional>
#include <sstream>
#include <string>

#include "ops/conv/pool_geometry.h"
#include "ops/core/dispatch.h"
#include "ops/elementwise/binary.h"
#include "ops/factory/factory.h"
#include "ops/shape/join.h"
#include "ops/shape/view.h"

#ifdef TG_WITH_CUDA
#include "ops/conv/cuda/pool.h"
#endif

namespace tg {
namespace {

// Window parameters as given by the caller (before sizes are known), per spatial dim (nd of them).
struct PoolParams {
  PoolMode mode;
  int nd = 2;
  std::array<int64_t, 3> k{1, 1, 1}, s{1, 1, 1}, p{0, 0, 0}, dil{1, 1, 1};
  std::array<int64_t, 3> out{1, 1, 1};  // adaptive output size
  bool ceil_mode = false;
  bool count_include_pad = true;
  int64_t divisor_override = 0;  // 0: none
};

// "max_pool2d", "avg_pool3d", "adaptive_avg_pool1d", ...
std::string mode_name(PoolMode m, int nd) {
  const char* base = m == PoolMode::Max ? "max_pool" : m == PoolMode::Avg ? "avg_pool" : "adaptive_avg_pool";
  return base + std::to_string(nd) + "d";
}

std::string mode_name(const PoolParams& p) { return mode_name(p.mode, p.nd); }

// "[C, H, W]" / "[N, C, H, W]" style names of the accepted layouts.
std::string layouts(int nd) {
  static const char* spatial[] = {"L", "H, W", "D, H, W"};
  return std::to_string(nd + 1) + "-D [C, " + spatial[nd - 1] + "] or " + std::to_string(nd + 2) + "-D [N, C, " +
         spatial[nd - 1] + "]";
}

std::string list_str(const std::array<int64_t, 3>& v, int nd) {
  return shape_str(Shape(v.begin(), v.begin() + nd));
}

// Output length of one pooled dim (PyTorch's pooling_output_shape).
int64_t pooled_size(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil_mode) {
  const int64_t num = in + 2 * p - d * (k - 1) - 1 + (ceil_mode ? s - 1 : 0);
  int64_t out = (num >= 0 ? num / s : -((-num + s - 1) / s)) + 1;
  if (ceil_mode && (out - 1) * s >= in + p) --out;
  return out;
}

// Validates (nd + 2)-D input sizes and fills the geometry (strides are the input's).
PoolGeometry make_geometry(const PoolParams& p, const Shape& sizes, const Shape& strides) {
  const std::string op = mode_name(p);
  TG_CHECK(static_cast<int>(sizes.size()) == p.nd + 2, "[", op, "] input of shape ", shape_str(sizes),
           " has the wrong rank: expected ", layouts(p.nd));
  PoolGeometry g;
  g.mode = p.mode;
  g.N = sizes[0], g.C = sizes[1];
  g.sN = strides[0], g.sC = strides[1];
  g.count_include_pad = p.count_include_pad;
  g.divisor_override = p.divisor_override;
  bool empty = g.C <= 0;
  const int off = 3 - p.nd;  // fewer spatial dims are the trailing ones of (D, H, W)
  for (int i = 0; i < p.nd; ++i) {
    g.in[off + i] = sizes[2 + i];
    g.sx[off + i] = strides[2 + i];
    g.k[off + i] = p.k[i], g.s[off + i] = p.s[i], g.p[off + i] = p.p[i], g.dil[off + i] = p.dil[i];
    empty = empty || sizes[2 + i] <= 0;
  }
  TG_CHECK(!empty, "[", op, "] input of shape ", shape_str(sizes), " has an empty non-batch dim: expected C",
           p.nd == 1 ? " and L" : p.nd == 2 ? ", H and W" : ", D, H and W", " > 0");
  bool ok = true;
  for (int i = 0; i < p.nd; ++i) {
    g.out[off + i] = p.mode == PoolMode::Adaptive
                         ? p.out[i]
                         : pooled_size(g.in[off + i], p.k[i], p.s[i], p.p[i], p.dil[i], p.ceil_mode);
    ok = ok && g.out[off + i] > 0;
  }
  if (!ok) {
    Shape out(g.out + off, g.out + 3);
    TG_FAIL("[", op, "] input of shape ", shape_str(sizes), " is too small for kernel ", list_str(p.k, p.nd),
            " (dilation ", list_str(p.dil, p.nd), ", padding ", list_str(p.p, p.nd), "): output would be ",
            shape_str(out));
  }
  return g;
}

// The pooled sizes [N, C, spatial...] of a geometry with nd spatial dims.
Shape pooled_shape(const PoolGeometry& g, int nd) {
  Shape out{g.N, g.C};
  for (int i = 3 - nd; i < 3; ++i) out.push_back(g.out[i]);
  return out;
}

template <typename T>
void pool_forward_cpu(const PoolGeometry& g, const T* x, T* out, int64_t* idx) {
  for (int64_t i = 0; i < g.out_numel(); ++i) pool_output(g, x, out, idx, i);
}

template <typename T>
void avg_backward_cpu(const PoolGeometry& g, const T* grad, T* gi) {
  std::fill(gi, gi + g.in_numel(), T(0));
  for (int64_t i = 0; i < g.out_numel(); ++i) {
    int64_t n, c, o[3];
    unflatten_output(g, i, n, c, o);
    const T v = grad[n * g.sN + c * g.sC + o[0] * g.sx[0] + o[1] * g.sx[1] + o[2] * g.sx[2]];
    avg_spread(g, v, o, gi + (n * g.C + c) * g.in_plane(), [](T* at, T add) { *at += add; });
  }
}

std::string params_str(const PoolParams& p) {
  std::ostringstream s;
  if (p.mode == PoolMode::Adaptive) {
    s << "output_size=" << list_str(p.out, p.nd);
    return s.str();
  }
  s << "kernel=" << list_str(p.k, p.nd) << ", stride=" << list_str(p.s, p.nd) << ", padding=" << list_str(p.p, p.nd);
  if (p.mode == PoolMode::Max) s << ", dilation=" << list_str(p.dil, p.nd);
  if (p.mode == PoolMode::Avg) s << ", count_include_pad=" << (p.count_include_pad ? "true" : "false");
  if (p.divisor_override != 0) s << ", divisor_override=" << p.divisor_override;
  s << ", ceil_mode=" << (p.ceil_mode ? "true" : "false");
  return s.str();
}

// The schema of each (mode, nd) forward op, and of the average backward ops.
const OpSchema& forward_schema(PoolMode m, int nd) {
  static const OpSchema table[3][3] = {
      {{.name = "max_pool1d_with_indices"}, {.name = "max_pool2d_with_indices"}, {.name = "max_pool3d_with_indices"}},
      {{.name = "avg_pool1d"}, {.name = "avg_pool2d"}, {.name = "avg_pool3d"}},
      {{.name = "adaptive_avg_pool1d"}, {.name = "adaptive_avg_pool2d"}, {.name = "adaptive_avg_pool3d"}}};
  return table[static_cast<int>(m)][nd - 1];
}

const OpSchema& backward_schema(PoolMode m, int nd) {
  static const OpSchema table[2][3] = {
      {{.name = "avg_pool1d_backward"}, {.name = "avg_pool2d_backward"}, {.name = "avg_pool3d_backward"}},
      {{.name = "adaptive_avg_pool1d_backward"},
       {.name = "adaptive_avg_pool2d_backward"},
       {.name = "adaptive_avg_pool3d_backward"}}};
  return table[m == PoolMode::Avg ? 0 : 1][nd - 1];
}

class AvgPoolBackwardOp;

// Forward pooling over an (nd + 2)-D input; Max has a second output, the int64 indices.
class PoolOp final : public Op {
 public:
  explicit PoolOp(PoolParams p) : p_(p) {}
  const OpSchema& schema() const override { return forward_schema(p_.mode, p_.nd); }
  std::vector<TensorMeta> infer(const TensorList& in) const override {
    check_floating(mode_name(p_).c_str(), in[0]);
    const PoolGeometry g = make_geometry(p_, in[0].sizes(), in[0].strides());
    const Shape out = pooled_shape(g, p_.nd);
    std::vector<TensorMeta> metas{contiguous_meta(out, in[0].dtype(), in[0].device())};
    if (p_.mode == PoolMode::Max) metas.push_back(contiguous_meta(out, kInt64, in[0].device()));
    return metas;
  }
  void eval(const TensorList& in, TensorList& out) const override {
    const PoolGeometry g = make_geometry(p_, in[0].sizes(), in[0].strides());
    Tensor* idx = p_.mode == PoolMode::Max ? &out[1] : nullptr;
    if (g.out_numel() == 0) return;
#ifdef TG_WITH_CUDA
    if (out[0].is_cuda()) {
      cuda::pool_forward(g, in[0], out[0], idx);
      return;
    }
#endif
    TG_DISPATCH_FLOATING(in[0].dtype(), schema().name.data(), [&] {
      pool_forward_cpu<scalar_t>(g, in[0].data_ptr<scalar_t>(), out[0].data_ptr<scalar_t>(),
                                 idx ? idx->data_ptr<int64_t>() : nullptr);
    });
  }
  TensorList backward(const BackwardContext& ctx, const TensorList& grads) const override;
  SaveSpec saves() const override { return {.inputs = false, .outputs = p_.mode == PoolMode::Max}; }
  std::string attrs() const override { return params_str(p_); }

 private:
  PoolParams p_;
};

// grad_input [N, C, *in] of avg/adaptive pooling from grad_output [N, C, *out]; the pooled input's
// sizes are an attribute, so the input itself need not be saved.
class AvgPoolBackwardOp final : public Op {
 public:
  AvgPoolBackwardOp(PoolParams p, Shape input_sizes) : p_(p), in_sizes_(std::move(input_sizes)) {}
  const OpSchema& schema() const override { return backward_schema(p_.mode, p_.nd); }
  std::vector<TensorMeta> infer(const TensorList& in) const override {
    const PoolGeometry g = geometry(in[0]);
    const Shape expected = pooled_shape(g, p_.nd);
    TG_CHECK(in[0].sizes() == expected, "[", schema().name, "] grad_output of shape ", shape_str(in[0].sizes()),
             " does not match the pooled shape ", shape_str(expected));
    return single_output(contiguous_meta(in_sizes_, in[0].dtype(), in[0].device()));
  }
  void eval(const TensorList& in, TensorList& out) const override {
    const PoolGeometry g = geometry(in[0]);
    if (g.in_numel() == 0) return;
#ifdef TG_WITH_CUDA
    if (out[0].is_cuda()) {
      cuda::avg_pool_backward(g, in[0], out[0]);
      return;
    }
#endif
    TG_DISPATCH_FLOATING(in[0].dtype(), schema().name.data(),
                         [&] { avg_backward_cpu<scalar_t>(g, in[0].data_ptr<scalar_t>(), out[0].data_ptr<scalar_t>()); });
  }
  // Linear in grad_output; its adjoint is the forward pooling.
  TensorList backward(const BackwardContext&, const TensorList& grads) const override {
    return {call_op<PoolOp>({grads[0]}, p_)};
  }
  SaveSpec saves() const override { return {.inputs = false, .outputs = false}; }
  std::string attrs() const override { return params_str(p_) + ", input_sizes=" + shape_str(in_sizes_); }

 private:
  // Geometry over the pooled input's sizes, with grad_output's strides.
  PoolGeometry geometry(const Tensor& grad) const {
    check_floating(schema().name.data(), grad);
    TG_CHECK(grad.dim() == p_.nd + 2, "[", schema().name, "] grad_output of shape ", shape_str(grad.sizes()),
             " is not ", p_.nd + 2, "-D");
    return make_geometry(p_, in_sizes_, grad.strides());
  }
  PoolParams p_;
  Shape in_sizes_;
};

TensorList PoolOp::backward(const BackwardContext& ctx, const TensorList& grads) const {
  const Tensor& g = grads[0];
  if (!g.defined()) return {Tensor()};
  const TensorMeta& m = ctx.input_meta(0);
  if (p_.mode != PoolMode::Max) return {call_op<AvgPoolBackwardOp>({g}, p_, m.sizes)};
  // Max: scatter-add each gradient to the flat position of its maximum (index_add is differentiable).
  const int64_t N = m.sizes[0], C = m.sizes[1];
  int64_t plane = 1;
  for (size_t i = 2; i < m.sizes.size(); ++i) plane *= m.sizes[i];
  Shape base_shape{N, C};
  base_shape.resize(m.sizes.size(), 1);
  const Tensor idx = ctx.output(1);
  const Tensor base = mul(arange(N * C, TensorOptions{kInt64, g.device()}), plane).view(base_shape);
  const Tensor flat = add(idx, base).reshape({-1});
  Tensor gi = index_add(zeros({N * C * plane}, TensorOptions{g.dtype(), g.device()}), 0, flat, g.reshape({-1}));
  return {gi.view(m.sizes)};
}

// Expands a list of 1 or nd values to nd; `what` names it in errors.
std::array<int64_t, 3> per_dim(const std::string& op, int nd, const char* what, const Shape& v, int64_t min) {
  TG_CHECK(v.size() == 1 || static_cast<int>(v.size()) == nd, "[", op, "] ", what, " must have ",
           nd == 1 ? std::string("1 element") : "1 or " + std::to_string(nd) + " elements", ", got ", shape_str(v));
  std::array<int64_t, 3> out{1, 1, 1};
  for (int i = 0; i < nd; ++i) {
    out[i] = v.size() == 1 ? v[0] : v[i];
    TG_CHECK(out[i] >= min, "[", op, "] ", what, " ", shape_str(v), " must be >= ", min);
  }
  return out;
}

PoolParams window_params(PoolMode mode, int nd, const Shape& kernel, const Shape& stride, const Shape& padding,
                         const Shape& dilation, bool ceil_mode) {
  PoolParams p{.mode = mode, .nd = nd};
  const std::string op = mode_name(p);
  p.k = per_dim(op, nd, "kernel_size", kernel, 1);
  p.s = stride.empty() ? p.k : per_dim(op, nd, "stride", stride, 1);
  p.p = per_dim(op, nd, "padding", padding, 0);
  p.dil = per_dim(op, nd, "dilation", dilation, 1);
  for (int i = 0; i < nd; ++i)
    TG_CHECK(p.p[i] <= p.k[i] / 2, "[", op, "] padding ", shape_str(padding), " should be at most half of kernel_size ",
             shape_str(kernel));
  p.ceil_mode = ceil_mode;
  return p;
}

PoolParams avg_params(int nd, const Shape& kernel, const Shape& stride, const Shape& padding, bool ceil_mode,
                      bool count_include_pad, std::optional<int64_t> divisor_override) {
  PoolParams p = window_params(PoolMode::Avg, nd, kernel, stride, padding, {1}, ceil_mode);
  p.count_include_pad = count_include_pad;
  if (divisor_override) {
    TG_CHECK(*divisor_override != 0, "[", mode_name(p), "] divisor_override must be non-zero, got 0");
    p.divisor_override = *divisor_override;
  }
  return p;
}

PoolParams adaptive_params(int nd, const Shape& output_size) {
  PoolParams p{.mode = PoolMode::Adaptive, .nd = nd};
  p.out = per_dim(mode_name(p), nd, "output_size", output_size, 1);
  return p;
}

// Runs a pooling op on an unbatched (nd + 1)-D or batched (nd + 2)-D input, restoring the rank of the input.
TensorList run_pool(const PoolParams& p, const Tensor& input) {
  const std::string op = mode_name(p);
  TG_CHECK(input.defined(), "[", op, "] got an undefined tensor");
  TG_CHECK(input.dim() == p.nd + 1 || input.dim() == p.nd + 2, "[", op, "] input of shape ", shape_str(input.sizes()),
           " has the wrong rank: expected ", layouts(p.nd));
  const bool batched = input.dim() == p.nd + 2;
  TensorList out = dispatch(std::make_shared<const PoolOp>(p), {batched ? input : input.unsqueeze(0)});
  if (!batched)
    for (Tensor& t : out) t = t.squeeze(0);
  return out;
}

std::pair<Tensor, Tensor> max_pool_nd(int nd, const Tensor& input, const Shape& kernel, const Shape& stride,
                                      const Shape& padding, const Shape& dilation, bool ceil_mode) {
  TensorList out = run_pool(window_params(PoolMode::Max, nd, kernel, stride, padding, dilation, ceil_mode), input);
  return {out[0], out[1]};
}

}  // namespace

std::pair<Tensor, Tensor> max_pool1d_with_indices(const Tensor& input, const Shape& kernel, const Shape& stride,
                                                  const Shape& padding, const Shape& dilation, bool ceil_mode) {
  return max_pool_nd(1, input, kernel, stride, padding, dilation, ceil_mode);
}

std::pair<Tensor, Tensor> max_pool2d_with_indices(const Tensor& input, const Shape& kernel, const Shape& stride,
                                                  const Shape& padding, const Shape& dilation, bool ceil_mode) {
  return max_pool_nd(2, input, kernel, stride, padding, dilation, ceil_mode);
}

std::pair<Tensor, Tensor> max_pool3d_with_indices(const Tensor& input, const Shape& kernel, const Shape& stride,
                                                  const Shape& padding, const Shape& dilation, bool ceil_mode) {
  return max_pool_nd(3, input, kernel, stride, padding, dilation, ceil_mode);
}

Tensor max_pool1d(const Tensor& input, const Shape& kernel, const Shape& stride, const Shape& padding,
                  const Shape& dilation, bool ceil_mode) {
  return max_pool_nd(1, input, kernel, stride, padding, dilation, ceil_mode).first;
}

Tensor max_pool2d(const Tensor& input, const Shape& kernel, const Shape& stride, const Shape& padding,
                  const Shape& dilation, bool ceil_mode) {
  return max_pool_nd(2, input, kernel, stride, padding, dilation, ceil_mode).first;
}

Tensor max_pool3d(const Tensor& input, const Shape& kernel, const Shape& stride, const Shape& padding,
                  const Shape& dilation, bool ceil_mode) {
  return max_pool_nd(3, input, kernel, stride, padding, dilation, ceil_mode).first;
}

Tensor avg_pool1d(const Tensor& input, const Shape& kernel, const Shape& stride, const Shape& padding, bool ceil_mode,
                  bool count_include_pad) {
  return run_pool(avg_params(1, kernel, stride, padding, ceil_mode, count_include_pad, std::nullopt), input)[0];
}

Tensor avg_pool2d(const Tensor& input, const Shape& kernel, const Shape& stride, const Shape& padding, bool ceil_mode,
                  bool count_include_pad, std::optional<int64_t> divisor_override) {
  return run_pool(avg_params(2, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override), input)[0];
}

Tensor avg_pool3d(const Tensor& input, const Shape& kernel, const Shape& stride, const Shape& padding, bool ceil_mode,
                  bool count_include_pad, std::optional<int64_t> divisor_override) {
  return run_pool(avg_params(3, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override), input)[0];
}

Tensor adaptive_avg_pool1d(const Tensor& input, const Shape& output_size) {
  return run_pool(adaptive_params(1, output_size), input)[0];
}

Tensor adaptive_avg_pool2d(const Tensor& input, const Shape& output_size) {
  return run_pool(adaptive_params(2, output_size), input)[0];
}

Tensor adaptive_avg_pool3d(const Tensor& input, const Shape& output_size) {
  return run_pool(adaptive_params(3, output_size), input)[0];
}

}  // namespace tg
