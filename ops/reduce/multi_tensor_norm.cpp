#include "ops/reduce/multi_tensor_norm.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "ops/core/dispatch.h"
#include "ops/elementwise/copy.h"

#ifdef TG_WITH_CUDA
#include "ops/reduce/cuda/multi_tensor_norm.h"
#endif

namespace tg {
namespace {

// The dtype the norms accumulate in and are returned in.
DType norm_dtype(const TensorList& in) {
  for (const Tensor& t : in)
    if (t.dtype() == kFloat64) return kFloat64;
  return kFloat32;
}

// One tensor's norm on the CPU, accumulated in double.
template <typename T>
double norm_of(const Tensor& t, double ord) {
  const T* x = t.data_ptr<T>();
  const int64_t n = t.numel();
  double acc = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double v = std::abs(static_cast<double>(x[i]));
    if (ord == 1.0) acc += v;
    else if (ord == 2.0) acc += v * v;
    else acc = std::isnan(v) || std::isnan(acc) ? NAN : std::max(acc, v);
  }
  return ord == 2.0 ? std::sqrt(acc) : acc;
}

class MultiTensorNormOp final : public Op {
 public:
  explicit MultiTensorNormOp(double ord) : ord_(ord) {}
  const OpSchema& schema() const override {
    static const OpSchema s{.name = "multi_tensor_norm", .flags = kNonDifferentiable};
    return s;
  }
  std::vector<TensorMeta> infer(const TensorList& in) const override {
    TG_CHECK(!in.empty(), "[multi_tensor_norm] expected at least one tensor");
    TG_CHECK(ord_ == 1.0 || ord_ == 2.0 || ord_ == INFINITY, "[multi_tensor_norm] ord must be 1, 2 or inf, got ",
             ord_);
    const Device device = in[0].device();
    for (size_t i = 0; i < in.size(); ++i) {
      TG_CHECK(in[i].defined(), "[multi_tensor_norm] tensor ", i, " is undefined");
      TG_CHECK(in[i].is_floating_point(), "[multi_tensor_norm] expected floating-point tensors, got ",
               dtype_name(in[i].dtype()), " at position ", i);
      TG_CHECK(in[i].device() == device, "[multi_tensor_norm] expected all tensors on ", device.str(), " (tensor 0), got ",
               in[i].device().str(), " at position ", i);
    }
    return single_output(contiguous_meta({static_cast<int64_t>(in.size())}, norm_dtype(in), device));
  }
  void eval(const TensorList& in, TensorList& out) const override {
    // The kernels read contiguous memory; gradients and parameters already are.
    TensorList dense;
    dense.reserve(in.size());
    for (const Tensor& t : in) dense.push_back(t.is_contiguous() ? t : t.contiguous());
#ifdef TG_WITH_CUDA
    if (out[0].is_cuda()) {
      cuda::multi_tensor_norm(dense, ord_, out[0]);
      return;
    }
#endif
    std::vector<double> norms(dense.size());
    for (size_t i = 0; i < dense.size(); ++i)
      norms[i] = TG_DISPATCH_FLOATING(dense[i].dtype(), "multi_tensor_norm",
                                      [&] { return norm_of<scalar_t>(dense[i], ord_); });
    TG_DISPATCH_FLOAT_DOUBLE(out[0].dtype(), "multi_tensor_norm", [&] {
      scalar_t* o = out[0].data_ptr<scalar_t>();
      for (size_t i = 0; i < norms.size(); ++i) o[i] = static_cast<scalar_t>(norms[i]);
    });
  }
  std::string attrs() const override { return "ord=" + std::to_string(ord_); }

 private:
  double ord_;
};

}  // namespace

Tensor multi_tensor_norm(const TensorList& tensors, double ord) { return call_op<MultiTensorNormOp>(tensors, ord); }

}  // namespace tg
