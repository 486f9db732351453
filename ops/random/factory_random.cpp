// Random factories: rand, randn, randint and their _like forms, drawn from the counter-based Philox
// generator. Each op takes its seed and offset from the global generator when it is created, so
// running the same op object again reproduces its numbers (and graph replays can advance the offset).
#include <limits>

#include "ops/core/dispatch.h"
#include "ops/factory/factory.h"
#include "ops/factory/factory_internal.h"
#include "ops/random/random.h"
#include "ops/random/random_draw.h"

namespace tg {
namespace {

// Integers every value of which the dtype holds exactly (randint bounds must lie within).
void exact_int_range(DType dtype, int64_t& lo, int64_t& hi) {
  switch (dtype) {
    case DType::Bool: lo = 0; hi = 1; return;
    case DType::Int32: lo = std::numeric_limits<int32_t>::min(); hi = std::numeric_limits<int32_t>::max(); return;
    case DType::Int64: lo = std::numeric_limits<int64_t>::min(); hi = std::numeric_limits<int64_t>::max(); return;
    case DType::Float16: lo = -(int64_t{1} << 11); hi = int64_t{1} << 11; return;
    case DType::BFloat16: lo = -(int64_t{1} << 8); hi = int64_t{1} << 8; return;
    case DType::Float32: lo = -(int64_t{1} << 24); hi = int64_t{1} << 24; return;
    case DType::Float64: lo = -(int64_t{1} << 53); hi = int64_t{1} << 53; return;
  }
}

// rand / randn / randint: a fresh contiguous tensor of draws from (seed, offset).
class RandomOp final : public Op {
 public:
  RandomOp(RandomKind kind, Shape sizes, DType dtype, Device device, int64_t low = 0, int64_t high = 0)
      : kind_(kind), sizes_(std::move(sizes)), dtype_(dtype), device_(device), low_(low), high_(high) {
    validate();
    state_ = Generator::global().reserve(random_blocks(kind_, dtype_, shape_numel(sizes_)));
  }

  const OpSchema& schema() const override {
    static const OpSchema rand{.name = "rand", .flags = kFactory | kRandom};
    static const OpSchema randn{.name = "randn", .flags = kFactory | kRandom};
    static const OpSchema randint{.name = "randint", .flags = kFactory | kRandom};
    switch (kind_) {
      case RandomKind::Normal: return randn;
      case RandomKind::Randint: return randint;
      case RandomKind::Uniform: break;
    }
    return rand;
  }

  std::vector<TensorMeta> infer(const TensorList&) const override {
    validate();
    return single_output(contiguous_meta(sizes_, dtype_, device_));
  }

  void eval(const TensorList&, TensorList& outputs) const override {
    const uint64_t range = static_cast<uint64_t>(high_) - static_cast<uint64_t>(low_);
    draw_random(outputs[0], kind_, state_, name(), low_, range);
  }

  std::shared_ptr<const Op> redraw() const override {
    return std::make_shared<const RandomOp>(kind_, sizes_, dtype_, device_, low_, high_);
  }

  std::string attrs() const override {
    std::string s = factory_attrs(sizes_, dtype_, device_);
    if (kind_ == RandomKind::Randint) s += detail::concat(", low=", low_, ", high=", high_);
    return s + detail::concat(", seed=", state_.seed, ", offset=", state_.offset);
  }

 private:
  void validate() const {
    check_factory_sizes(name(), sizes_);
    if (kind_ != RandomKind::Randint) {
      TG_CHECK(is_floating(dtype_), "[", name(), "] expected a floating dtype, got ", dtype_name(dtype_));
      return;
    }
    TG_CHECK(low_ < high_, "[randint] expected low < high, got low=", low_, ", high=", high_);
    int64_t lo = 0, hi = 0;
    exact_int_range(dtype_, lo, hi);
    TG_CHECK(low_ >= lo && high_ - 1 <= hi, "[randint] bounds [", low_, ", ", high_, ") do not fit in ",
             dtype_name(dtype_), ", whose exact integers lie in [", lo, ", ", hi, "]");
  }

  RandomKind kind_;
  Shape sizes_;
  DType dtype_;
  Device device_;
  int64_t low_, high_;
  PhiloxState state_;
};

Tensor make_random(RandomKind kind, const Shape& sizes, const TensorOptions& options, int64_t low = 0,
                   int64_t high = 0) {
  return finish_factory(call_op<RandomOp>({}, kind, sizes, options.dtype_or(kind == RandomKind::Randint ? kInt64 : kFloat32), options.device, low, high), options);
}

}  // namespace

Tensor rand(const Shape& sizes, TensorOptions options) { return make_random(RandomKind::Uniform, sizes, options); }

Tensor randn(const Shape& sizes, TensorOptions options) { return make_random(RandomKind::Normal, sizes, options); }

Tensor randint(int64_t low, int64_t high, const Shape& sizes, TensorOptions options) {
  return make_random(RandomKind::Randint, sizes, options, low, high);
}

Tensor rand_like(const Tensor& t) { return rand(t.sizes(), t.options()); }
Tensor randn_like(const Tensor& t) { return randn(t.sizes(), t.options()); }
Tensor randint_like(const Tensor& t, int64_t low, int64_t high) { return randint(low, high, t.sizes(), t.options()); }

void manual_seed(uint64_t seed) { Generator::global().set_seed(seed); }

}  // namespace tg
