// from_vector: a tensor holding a copy of host values, as an op whose attribute is the data itself,
// so a traced graph can keep (and fold) such constants.
#include <algorithm>
#include <cstring>
#include <memory>
#include <sstream>
#include <type_traits>

#include "ops/core/dispatch.h"
#include "ops/factory/factory.h"
#include "ops/factory/factory_internal.h"

namespace tg {
namespace {

// How many values attrs() prints before eliding the rest.
constexpr int64_t kMaxPrintedValues = 8;

// A constant tensor: the op owns the values (already in the target dtype) and copies them out.
class FromDataOp final : public Op {
 public:
  FromDataOp(std::shared_ptr<const std::vector<unsigned char>> bytes, Shape sizes, DType dtype, Device device)
      : bytes_(std::move(bytes)), sizes_(std::move(sizes)), dtype_(dtype), device_(device) {}

  // On a device the op is a copy from host memory (kDeviceCopy): never recomputed, never captured.
  const OpSchema& schema() const override {
    static const OpSchema on_host{.name = "tensor", .flags = kFactory};
    static const OpSchema on_device{.name = "tensor", .flags = kFactory | kDeviceCopy};
    return device_.is_cpu() ? on_host : on_device;
  }

  std::vector<TensorMeta> infer(const TensorList&) const override {
    check_factory_sizes(name(), sizes_);
    TG_CHECK(static_cast<int64_t>(bytes_->size()) == shape_numel(sizes_) * dtype_size(dtype_),
             "[tensor] holds ", bytes_->size(), " bytes, but sizes ", shape_str(sizes_), " of ", dtype_name(dtype_),
             " need ", shape_numel(sizes_) * dtype_size(dtype_));
    return single_output(contiguous_meta(sizes_, dtype_, device_));
  }

  void eval(const TensorList&, TensorList& outputs) const override {
    const Tensor& out = outputs[0];
    copy_bytes(out.raw_data(), out.device(), bytes_->data(), kCPU, static_cast<int64_t>(bytes_->size()));
  }

  std::string attrs() const override {
    std::ostringstream os;
    os << factory_attrs(sizes_, dtype_, device_) << ", values=[";
    const int64_t n = shape_numel(sizes_);
    TG_DISPATCH_ALL(dtype_, "tensor", [&] {
      const auto* p = reinterpret_cast<const scalar_t*>(bytes_->data());
      for (int64_t i = 0; i < std::min(n, kMaxPrintedValues); ++i) {
        if (i) os << ", ";
        if constexpr (std::is_same_v<scalar_t, bool>) os << (p[i] ? "true" : "false");
        else os << p[i];
      }
    });
    if (n > kMaxPrintedValues) os << ", ...";
    os << "]";
    return os.str();
  }

 private:
  std::shared_ptr<const std::vector<unsigned char>> bytes_;
  Shape sizes_;
  DType dtype_;
  Device device_;
};

}  // namespace

template <typename T>
Tensor from_vector(const std::vector<T>& values, const Shape& sizes, TensorOptions options) {
  options.dtype = options.dtype_or(dtype_of<T>());
  check_factory_sizes("from_vector", sizes);
  const int64_t n = shape_numel(sizes);
  TG_CHECK(static_cast<int64_t>(values.size()) == n, "[from_vector] ", values.size(), " values given for sizes ",
           shape_str(sizes), " (", n, " elements)");
  auto bytes = std::make_shared<std::vector<unsigned char>>(static_cast<size_t>(n * dtype_size(*options.dtype)));
  TG_DISPATCH_ALL(*options.dtype, "from_vector", [&] {
    for (int64_t i = 0; i < n; ++i) {
      // static_cast gives C++'s conversions: truncation toward zero for float to int, x != 0 for bool.
      const auto v = static_cast<scalar_t>(values[static_cast<size_t>(i)]);
      std::memcpy(bytes->data() + i * sizeof(scalar_t), &v, sizeof(scalar_t));
    }
  });
  Tensor t = call_op<FromDataOp>({}, std::move(bytes), sizes, *options.dtype, options.device);
  return finish_factory(std::move(t), options);
}

template Tensor from_vector<bool>(const std::vector<bool>&, const Shape&, TensorOptions);
template Tensor from_vector<int32_t>(const std::vector<int32_t>&, const Shape&, TensorOptions);
template Tensor from_vector<int64_t>(const std::vector<int64_t>&, const Shape&, TensorOptions);
template Tensor from_vector<float>(const std::vector<float>&, const Shape&, TensorOptions);
template Tensor from_vector<double>(const std::vector<double>&, const Shape&, TensorOptions);

}  // namespace tg
