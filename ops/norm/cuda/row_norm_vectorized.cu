// layer_norm's register-resident kernels for plain layer_norm (ops/norm/cuda/row_norm_vectorized.h);
// the kernels themselves are in row_norm_kernels.cuh.
#include "ops/norm/cuda/row_norm_vectorized.h"

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

}  // namespace tg::cuda
