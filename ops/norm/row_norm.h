// layer_norm and group_norm as one fused op each way (forward, backward): both normalize the rows
// of a [outer, groups, channels_per_group, inner] view of their input, with statistics accumulated
// in float32 for 16-bit and float32 inputs (double on the CPU) and float64 for float64, as
// PyTorch's native_layer_norm and native_group_norm do. See Note [Row normalization] in row_norm.cpp.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "tensor/half.h"
#include "tensor/hd.h"
#include "ops/core/op.h"
#include "tensor/tensor.h"

namespace tg {

// Which elements a row normalization treats as one row, and where their affine parameters sit.
// The input is contiguous and viewed as [outer, groups, channels, inner]; a row is one
// (outer, group) pair of channels * inner elements; the parameters are [groups * channels].
// layer_norm: groups = 1, inner = 1, channels = the normalized numel. group_norm: [N, G, C/G, HW].
struct RowNormGeometry {
  int64_t outer = 1, groups = 1, channels = 1, inner = 1;
  double eps = 1e-5;

  TG_HD int64_t rows() const { return outer * groups; }
  TG_HD int64_t cols() const { return channels * inner; }
  TG_HD int64_t params() const { return groups * channels; }
  // The parameter index of column j of row r.
  TG_HD int64_t param_of(int64_t r, int64_t j) const { return (r % groups) * channels + j / inner; }
};

// The outputs of row_norm: the normalized input and the per-row statistics its backward reads.
struct RowNormResult {
  Tensor output;  // the input's dtype and shape
  Tensor mean;    // [rows], float32 (float64 for float64 inputs)
  Tensor rstd;    // [rows], 1 / sqrt(var + eps), biased variance
};

// Normalizes the rows of `input` (see RowNormGeometry) and applies the optional affine parameters
// (both of the same dtype: the input's, or float32 for a 16-bit input). `op` names the caller in
// errors and in graphs ("layer_norm", "group_norm").
RowNormResult row_norm(const char* op, const Tensor& input, const Tensor& weight, const Tensor& bias,
                       const RowNormGeometry& geometry);

// What a row norm's forward node computes, for graph rewrites.
struct RowNormInfo {
  std::string name;  // "layer_norm" or "group_norm"
  RowNormGeometry geometry;
  bool has_weight = false, has_bias = false;
};
// Set when `op` is the forward op of layer_norm or group_norm (inputs x[, weight][, bias]; outputs
// y, mean, rstd).
std::optional<RowNormInfo> row_norm_info(const Op& op);

// What a row norm's backward node computes, for graph rewrites (inputs gy, x[, weight], mean, rstd;
// outputs gx[, grad_weight][, grad_bias]).
struct RowNormBackwardInfo {
  std::string name;  // the forward's: "layer_norm" or "group_norm"
  RowNormGeometry geometry;
  bool has_weight = false, weight_grad = false, bias_grad = false;
  DType param_dtype = kFloat32;
};
// Set when `op` is the backward op of layer_norm or group_norm.
std::optional<RowNormBackwardInfo> row_norm_backward_info(const Op& op);

// Gradients of a row norm of x (the input's, and the parameters' as [params] in the statistics'
// dtype), written with differentiable tg ops: what create_graph backward passes run. `w` may be
// undefined; only the gradients asked for are computed.
struct RowNormGrads {
  Tensor input, weight, bias;
};
RowNormGrads row_norm_grads_composed(const Tensor& x, const Tensor& w, const Tensor& gy, const RowNormGeometry& g,
                                     bool input_grad, bool weight_grad, bool bias_grad);

// Calls f.template operator()<T, W>() for x's element type T and the parameters' type W (T, or
// float for a 16-bit input with float32 parameters): what the CPU and CUDA kernels dispatch on.
template <typename F>
void dispatch_row_norm(const char* name, DType x, DType params, F&& f) {
  TG_DISPATCH_FLOATING(x, name, [&] {
    using T = scalar_t;
    if constexpr (is_half_v<T>) {
      if (params == kFloat32) return f.template operator()<T, float>();
    }
    return f.template operator()<T, T>();
  });
}

// The parameters' dtype of a row norm: the weight's or the bias's, else the input's.
inline DType row_norm_param_dtype(const Tensor& x, const Tensor& w, const Tensor& b) {
  return w.defined() ? w.dtype() : (b.defined() ? b.dtype() : x.dtype());
}

// The kernels behind row_norm, on contiguous operands; undefined weight/bias/gw/gb are skipped.
void cpu_row_norm_forward(const Tensor& x, const Tensor& w, const Tensor& b, const RowNormGeometry& g,
                          const Tensor& y, const Tensor& mean, const Tensor& rstd);
void cpu_row_norm_backward(const Tensor& gy, const Tensor& x, const Tensor& w, const Tensor& mean,
                           const Tensor& rstd, const RowNormGeometry& g, const Tensor& gx, const Tensor& gw,
                           const Tensor& gb);
// The same on x's device: the CUDA kernels, or the CPU loops above.
void row_norm_forward_kernels(const Tensor& x, const Tensor& w, const Tensor& b, const RowNormGeometry& g,
                              const Tensor& y, const Tensor& mean, const Tensor& rstd);
void row_norm_backward_kernels(const Tensor& gy, const Tensor& x, const Tensor& w, const Tensor& mean,
                               const Tensor& rstd, const RowNormGeometry& g, const Tensor& gx, const Tensor& gw,
                               const Tensor& gb);

namespace cuda {
// The same on the current stream: one pass per row for the forward and for the input gradient,
// and a chunked column reduction for the parameter gradients (no host synchronization).
void row_norm_forward(const Tensor& x, const Tensor& w, const Tensor& b, const RowNormGeometry& g, const Tensor& y,
                      const Tensor& mean, const Tensor& rstd);
void row_norm_backward(const Tensor& gy, const Tensor& x, const Tensor& w, const Tensor& mean, const Tensor& rstd,
                       const RowNormGeometry& g, const Tensor& gx, const Tensor& gw, const Tensor& gb);
}  // namespace cuda

}  // namespace tg
