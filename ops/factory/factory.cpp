// Factories without randomness: empty, empty_strided, full (zeros, ones, scalar_tensor) and arange.
// Each is an op with no inputs, so tracing sees it as a graph node like any other op.
#include "ops/factory/factory.h"

#include <algorithm>
#include <cmath>

#include "ops/core/dispatch.h"
#include "ops/elementwise/copy.h"
#include "ops/elementwise/elementwise.h"
#include "ops/factory/factory_internal.h"

#ifdef TG_WITH_CUDA
#include "ops/factory/cuda/factory.h"
#endif

namespace tg {

void check_factory_sizes(std::string_view op, const Shape& sizes) {
  for (int64_t s : sizes) {
    TG_CHECK(s >= 0, "[", op, "] trying to create a tensor with negative dimension ", s, ": sizes ",
             shape_str(sizes));
  }
}

std::string factory_attrs(const Shape& sizes, DType dtype, Device device) {
  return detail::concat("size=", shape_str(sizes), ", dtype=", dtype_name(dtype), ", device=", device.str());
}

Tensor finish_factory(Tensor t, const TensorOptions& options) {
  if (options.requires_grad) t.requires_grad_(true);
  return t;
}

namespace {

// empty / empty_strided: allocation only; the values are whatever the allocator hands out.
class EmptyOp final : public Op {
 public:
  EmptyOp(Shape sizes, std::optional<Shape> strides, DType dtype, Device device)
      : sizes_(std::move(sizes)), strides_(std::move(strides)), dtype_(dtype), device_(device) {}

  const OpSchema& schema() const override {
    static const OpSchema empty{.name = "empty", .flags = kFactory};
    static const OpSchema strided{.name = "empty_strided", .flags = kFactory};
    return strides_ ? strided : empty;
  }

  std::vector<TensorMeta> infer(const TensorList&) const override {
    check_factory_sizes(name(), sizes_);
    TensorMeta m = contiguous_meta(sizes_, dtype_, device_);
    if (strides_) {
      TG_CHECK(strides_->size() == sizes_.size(), "[empty_strided] got ", sizes_.size(), " sizes ",
               shape_str(sizes_), " but ", strides_->size(), " strides ", shape_str(*strides_),
               "; expected one stride per dimension");
      for (int64_t s : *strides_) {
        TG_CHECK(s >= 0, "[empty_strided] strides must be non-negative, got ", shape_str(*strides_));
      }
      m.strides = *strides_;
    }
    return {std::move(m)};
  }

  // Allocation only (the dispatcher sizes storage to the strides' span); the values are whatever
  // the allocator hands out.
  void eval(const TensorList&, TensorList&) const override {}

  std::string attrs() const override {
    std::string s = factory_attrs(sizes_, dtype_, device_);
    if (strides_) s += ", stride=" + shape_str(*strides_);
    return s;
  }

 private:
  Shape sizes_;
  std::optional<Shape> strides_;
  DType dtype_;
  Device device_;
};

// What a FullOp is called: zeros and ones are full with a fixed value, scalar_tensor is 0-dim full.
enum class FullKind : uint8_t { Full, Zeros, Ones, ScalarTensor };

// A tensor with every element equal to one value.
class FullOp final : public Op {
 public:
  FullOp(FullKind kind, Shape sizes, Scalar value, DType dtype, Device device)
      : kind_(kind), sizes_(std::move(sizes)), value_(value), dtype_(dtype), device_(device) {}

  const OpSchema& schema() const override {
    static const OpSchema full{.name = "full", .flags = kFactory};
    static const OpSchema zeros{.name = "zeros", .flags = kFactory};
    static const OpSchema ones{.name = "ones", .flags = kFactory};
    static const OpSchema scalar{.name = "scalar_tensor", .flags = kFactory};
    switch (kind_) {
      case FullKind::Zeros: return zeros;
      case FullKind::Ones: return ones;
      case FullKind::ScalarTensor: return scalar;
      case FullKind::Full: break;
    }
    return full;
  }

  std::vector<TensorMeta> infer(const TensorList&) const override {
    check_factory_sizes(name(), sizes_);
    return single_output(contiguous_meta(sizes_, dtype_, device_));
  }

  void eval(const TensorList&, TensorList& outputs) const override {
    Tensor& out = outputs[0];
#ifdef TG_WITH_CUDA
    if (out.is_cuda()) {
      fill_(out, value_);  // the device fill kernel of the copy family
      return;
    }
#endif
    TG_CHECK(out.is_cpu(), "[", name(), "] unsupported device ", out.device().str());
    TG_DISPATCH_ALL(dtype_, name(), [&] {
      std::fill_n(out.data_ptr<scalar_t>(), out.numel(), value_.to<scalar_t>());
    });
  }

  std::string attrs() const override {
    std::string s = factory_attrs(sizes_, dtype_, device_);
    if (kind_ == FullKind::Full || kind_ == FullKind::ScalarTensor) s += ", value=" + scalar_str(value_);
    return s;
  }

 private:
  FullKind kind_;
  Shape sizes_;
  Scalar value_;
  DType dtype_;
  Device device_;
};

// True when v is an integer that converts to int64 without overflow.
bool is_whole(double v) { return std::isfinite(v) && std::trunc(v) == v && std::abs(v) < 9.2e18; }

// [start, end) by step; integer dtypes with whole start and step use exact int64 arithmetic, other
// cases compute start + i * step in double and convert (truncating toward zero for integer dtypes).
class ArangeOp final : public Op {
 public:
  ArangeOp(double start, double end, double step, DType dtype, Device device)
      : start_(start), end_(end), step_(step), dtype_(dtype), device_(device) {}

  const OpSchema& schema() const override {
    static const OpSchema s{.name = "arange", .flags = kFactory};
    return s;
  }

  std::vector<TensorMeta> infer(const TensorList&) const override {
    TG_CHECK(std::isfinite(start_) && std::isfinite(end_), "[arange] expected finite start and end, got start=",
             start_, ", end=", end_);
    TG_CHECK(step_ != 0 && std::isfinite(step_), "[arange] expected a finite nonzero step, got ", step_);
    TG_CHECK((step_ > 0 && end_ >= start_) || (step_ < 0 && end_ <= start_), "[arange] end ", end_,
             (step_ > 0 ? " is below" : " is above"), " start ", start_, " but step ", step_, " is ",
             (step_ > 0 ? "positive" : "negative"), "; the bounds are inconsistent with the step sign");
    TG_CHECK(dtype_ != kBool, "[arange] expected a numeric dtype, got bool");
    return single_output(contiguous_meta({count()}, dtype_, device_));
  }

  void eval(const TensorList&, TensorList& outputs) const override {
    Tensor& out = outputs[0];
    const int64_t n = out.numel();
    const bool exact = is_integral(dtype_, false) && is_whole(start_) && is_whole(step_);
    const auto istart = static_cast<int64_t>(start_);
    const auto istep = static_cast<int64_t>(step_);
#ifdef TG_WITH_CUDA
    if (out.is_cuda()) {
      arange_cuda(out.raw_data(), dtype_, n, start_, step_, exact, istart, istep);
      return;
    }
#endif
    TG_CHECK(out.is_cpu(), "[arange] unsupported device ", out.device().str());
    TG_DISPATCH_NUMERIC(dtype_, "arange", [&] {
      scalar_t* p = out.data_ptr<scalar_t>();
      for (int64_t i = 0; i < n; ++i) {
        p[i] = exact ? static_cast<scalar_t>(istart + i * istep) : static_cast<scalar_t>(start_ + i * step_);
      }
    });
  }

  std::string attrs() const override {
    return detail::concat("start=", start_, ", end=", end_, ", step=", step_, ", dtype=", dtype_name(dtype_),
                          ", device=", device_.str());
  }

 private:
  // ceil((end - start) / step), computed in double as PyTorch does.
  int64_t count() const {
    const double n = std::ceil((end_ - start_) / step_);
    TG_CHECK(n < 9.2e18, "[arange] the range [", start_, ", ", end_, ") with step ", step_,
             " has too many elements (", n, ")");
    return static_cast<int64_t>(n);
  }

  double start_, end_, step_;
  DType dtype_;
  Device device_;
};

Tensor make_full(FullKind kind, const Shape& sizes, Scalar value, const TensorOptions& options) {
  return finish_factory(call_op<FullOp>({}, kind, sizes, value, options.dtype_or(kind == FullKind::ScalarTensor ? value.default_dtype() : kFloat32), options.device), options);
}

}  // namespace

Tensor empty(const Shape& sizes, TensorOptions options) {
  return finish_factory(call_op<EmptyOp>({}, sizes, std::nullopt, options.dtype_or(kFloat32), options.device), options);
}

Tensor empty_strided(const Shape& sizes, const Shape& strides, TensorOptions options) {
  return finish_factory(call_op<EmptyOp>({}, sizes, strides, options.dtype_or(kFloat32), options.device), options);
}

Tensor zeros(const Shape& sizes, TensorOptions options) { return make_full(FullKind::Zeros, sizes, 0, options); }

Tensor ones(const Shape& sizes, TensorOptions options) { return make_full(FullKind::Ones, sizes, 1, options); }

Tensor full(const Shape& sizes, Scalar value, TensorOptions options) {
  return make_full(FullKind::Full, sizes, value, options);
}

Tensor arange(int64_t end, TensorOptions options) {
  return finish_factory(call_op<ArangeOp>({}, 0.0, static_cast<double>(end), 1.0, options.dtype_or(kInt64), options.device),
                        options);
}

Tensor arange(double start, double end, double step, TensorOptions options) {
  return finish_factory(call_op<ArangeOp>({}, start, end, step, options.dtype_or(kFloat32), options.device), options);
}

Tensor scalar_tensor(Scalar value, TensorOptions options) {
  return make_full(FullKind::ScalarTensor, {}, value, options);
}

Tensor scalar_tensor(Scalar value) { return scalar_tensor(value, {}); }

Tensor empty_like(const Tensor& t) { return empty(t.sizes(), t.options()); }
Tensor zeros_like(const Tensor& t) { return zeros(t.sizes(), t.options()); }
Tensor ones_like(const Tensor& t) { return ones(t.sizes(), t.options()); }
Tensor full_like(const Tensor& t, Scalar value) { return full(t.sizes(), value, t.options()); }

}  // namespace tg
