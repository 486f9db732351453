// layer_norm's register-resident kernels (row_norm_kernels.cuh) for plain layer_norm
// (ops/norm/cuda/row_norm_vectorized.h) and add_layer_norm (ops/norm/cuda/add_row_norm.h), in one
// file: the float32 and 16-bit sets of both are the same kernel instances. add_layer_norm's are
// instantiated for the dtype sets a residual stream meets: float32 throughout; a float32 residual
// with 16-bit updates and output (autocast); 16-bit throughout with 16-bit parameters. Others take
// the separate ops.
#include "ops/norm/cuda/row_norm_vectorized.h"

#include "ops/norm/cuda/add_row_norm.h"

#include <cstdint>

#include "ops/norm/cuda/row_norm_kernels.cuh"
#include "tensor/cuda/device_guard.h"

namespace tg::cuda {
namespace {

using namespace row_norm_kernels;

// Calls f.template operator()<T, W>() for the vectorizable element and parameter types.
template <typename F>
void dispatch_vectorized(DType x, DType params, F&& f) {
  switch (x) {
    case DType::Float32: return f.template operator()<float, float>();
    case DType::BFloat16:
      return params == kFloat32 ? f.template operator()<BFloat16, float>()
                                : f.template operator()<BFloat16, BFloat16>();
    case DType::Float16:
      return params == kFloat32 ? f.template operator()<Half, float>() : f.template operator()<Half, Half>();
    default: TG_FAIL("[layer_norm] no vectorized kernel for ", dtype_name(x));
  }
}

// Calls f.template operator()<T, L, W>() for the residual's dtype T, the 16-bit (or T) dtype L of
// the update, the output and their gradients, and the parameters' dtype W; false when the set has
// no kernel.
template <typename F>
bool dispatch_fused(DType t, DType low, DType params, F&& f) {
  if (t == kFloat32 && params == kFloat32) {
    if (low == kFloat32) return f.template operator()<float, float, float>(), true;
    if (low == kBFloat16) return f.template operator()<float, BFloat16, float>(), true;
    if (low == kFloat16) return f.template operator()<float, Half, float>(), true;
    return false;
  }
  if (t == low && t == params) {
    if (t == kBFloat16) return f.template operator()<BFloat16, BFloat16, BFloat16>(), true;
    if (t == kFloat16) return f.template operator()<Half, Half, Half>(), true;
  }
  return false;
}

}  // namespace

bool row_norm_vectorizable(const RowNormGeometry& g, const Tensor& x, std::initializer_list<const Tensor*> operands) {
  if (g.groups != 1 || g.inner != 1 || g.cols() % kVec != 0 || g.cols() > kMaxCols || g.cols() == 0) return false;
  if (x.dtype() != kFloat32 && x.dtype() != kBFloat16 && x.dtype() != kFloat16) return false;
  for (const Tensor* t : operands) {
    if (!t->defined()) continue;
    const auto bytes = static_cast<uintptr_t>(t->element_size() * kVec);
    if (reinterpret_cast<uintptr_t>(t->raw_data()) % bytes != 0) return false;
  }
  return true;
}

void row_norm_forward_vectorized(const Tensor& x, const Tensor& w, const Tensor& b, const RowNormGeometry& g,
                                 const Tensor& y, const Tensor& mean, const Tensor& rstd) {
  DeviceGuard guard(y.device().index);
  const int64_t rows = g.rows();
  const int cols = static_cast<int>(g.cols());
  dispatch_vectorized(x.dtype(), row_norm_param_dtype(x, w, b), [&]<typename T, typename W>() {
    with_vecs(cols, [&]<int kVecs>() {
      forward_kernel<T, T, T, W, kVecs><<<row_blocks(rows), 32 * kWarps, 0, current_stream()>>>(
          x.data_ptr<T>(), static_cast<const T*>(nullptr), w.data_ptr_or_null<W>(), b.data_ptr_or_null<W>(), rows, cols,
          static_cast<float>(g.eps), static_cast<T*>(nullptr), y.data_ptr<T>(), mean.data_ptr<float>(),
          rstd.data_ptr<float>());
    });
  });
  TG_CUDA_CHECK_LAUNCH();
}

void row_norm_backward_vectorized(const Tensor& gy, const Tensor& x, const Tensor& w, const Tensor& mean,
                                  const Tensor& rstd, const RowNormGeometry& g, const Tensor& gx, const Tensor& gw,
                                  const Tensor& gb) {
  DeviceGuard guard(gx.device().index);
  const DType param_dtype = w.defined() ? w.dtype() : row_norm_param_dtype(x, gw, gb);
  dispatch_vectorized(x.dtype(), param_dtype, [&]<typename T, typename W>() {
    launch_backward<T, T, T, W>(gy.data_ptr<T>(), x.data_ptr<T>(), w.data_ptr_or_null<W>(), mean.data_ptr<float>(),
                                rstd.data_ptr<float>(), g.rows(), static_cast<int>(g.cols()), nullptr, gx.data_ptr<T>(),
                                nullptr, gw.data_ptr_or_null<W>(), gb.data_ptr_or_null<W>(), gx.device(),
                                current_stream());
  });
}

bool add_row_norm_forward(const Tensor& x, const Tensor& u, const Tensor& w, const Tensor& b,
                          const RowNormGeometry& g, const Tensor& s, const Tensor& y, const Tensor& mean,
                          const Tensor& rstd) {
  if (!row_norm_vectorizable(g, x, {&x, &u, &w, &b, &s, &y}) || s.dtype() != x.dtype() || u.dtype() != y.dtype())
    return false;
  DeviceGuard guard(y.device().index);
  const int64_t rows = g.rows();
  const int cols = static_cast<int>(g.cols());
  return dispatch_fused(x.dtype(), u.dtype(), row_norm_param_dtype(x, w, b), [&]<typename T, typename L, typename W>() {
    with_vecs(cols, [&]<int kVecs>() {
      forward_kernel<T, L, L, W, kVecs><<<row_blocks(rows), 32 * kWarps, 0, current_stream()>>>(
          x.data_ptr<T>(), u.data_ptr<L>(), w.data_ptr_or_null<W>(), b.data_ptr_or_null<W>(), rows, cols,
          static_cast<float>(g.eps), s.data_ptr<T>(), y.data_ptr<L>(), mean.data_ptr<float>(), rstd.data_ptr<float>());
    });
    TG_CUDA_CHECK_LAUNCH();
  });
}

bool add_row_norm_backward(const Tensor& gy, const Tensor& x, const Tensor& w, const Tensor& mean,
                           const Tensor& rstd, const RowNormGeometry& g, const Tensor& acc, const Tensor& gx,
                           const Tensor& gx_low, const Tensor& gw, const Tensor& gb) {
  if (!row_norm_vectorizable(g, x, {&gy, &x, &w, &acc, &gx, &gx_low, &gw, &gb}) || gx.dtype() != x.dtype() ||
      (acc.defined() && acc.dtype() != x.dtype()) || (gx_low.defined() && gx_low.dtype() != gy.dtype()))
    return false;
  if (mean.dtype() != kFloat32) return false;
  DeviceGuard guard(gx.device().index);
  const DType params = w.defined() ? w.dtype() : row_norm_param_dtype(x, gw, gb);
  return dispatch_fused(x.dtype(), gy.dtype(), params, [&]<typename T, typename L, typename W>() {
    launch_backward<T, L, L, W>(gy.data_ptr<L>(), x.data_ptr<T>(), w.data_ptr_or_null<W>(), mean.data_ptr<float>(),
                                rstd.data_ptr<float>(), g.rows(), static_cast<int>(g.cols()), acc.data_ptr_or_null<T>(),
                                gx.data_ptr<T>(), gx_low.data_ptr_or_null<L>(), gw.data_ptr_or_null<W>(),
                                gb.data_ptr_or_null<W>(), gx.device(), current_stream());
  });
}

}  // namespace tg::cuda
