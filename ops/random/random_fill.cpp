// fill_rand_ and fill_randn_: one in-place random op, which takes its generator state when it is
// created (as the factories do), so that running it again reproduces its numbers.
#include "ops/random/random_fill.h"

#include "ops/core/dispatch.h"
#include "ops/factory/factory.h"
#include "ops/random/random.h"
#include "ops/random/random_draw.h"

namespace tg {
namespace {

class RandomFillOp final : public Op {
 public:
  RandomFillOp(RandomKind kind, int64_t numel, DType dtype) : kind_(kind), numel_(numel), dtype_(dtype) {
    TG_CHECK(is_floating(dtype_), "[", name(), "] expected a floating dtype, got ", dtype_name(dtype_));
    state_ = Generator::global().reserve(random_blocks(kind_, dtype_, numel_));
  }

  const OpSchema& schema() const override {
    static const OpSchema uniform{"fill_rand_", kInPlace | kOverwritesTarget | kRandom, 0};
    static const OpSchema normal{"fill_randn_", kInPlace | kOverwritesTarget | kRandom, 0};
    return kind_ == RandomKind::Normal ? normal : uniform;
  }

  std::vector<TensorMeta> infer(const TensorList& in) const override {
    TG_CHECK(in[0].is_contiguous(), "[", name(), "] expected a contiguous tensor");
    TG_CHECK(in[0].dtype() == dtype_ && in[0].numel() == numel_, "[", name(), "] expected ", numel_, " elements of ",
             dtype_name(dtype_), ", got ", in[0].numel(), " of ", dtype_name(in[0].dtype()));
    return single_output(meta_of(in[0]));
  }

  void eval(const TensorList&, TensorList& out) const override { draw_random(out[0], kind_, state_, name()); }

  TensorList backward(const BackwardContext&, const TensorList&) const override { return {Tensor()}; }
  SaveSpec saves() const override { return {.inputs = false}; }

  std::shared_ptr<const Op> redraw() const override {
    return std::make_shared<const RandomFillOp>(kind_, numel_, dtype_);
  }

  std::string attrs() const override {
    return detail::concat("seed=", state_.seed, ", offset=", state_.offset);
  }

 private:
  RandomKind kind_;
  int64_t numel_;
  DType dtype_;
  PhiloxState state_;
};

Tensor& fill_random(Tensor& t, RandomKind kind) {
  if (!t.is_contiguous()) {
    // Drawn whole, then copied in: the same values, element for element, as a contiguous target.
    const TensorOptions options{.dtype = t.dtype(), .device = t.device()};
    t.copy_(kind == RandomKind::Normal ? randn(t.sizes(), options) : rand(t.sizes(), options));
    return t;
  }
  call_op<RandomFillOp>({t}, kind, t.numel(), t.dtype());
  return t;
}

}  // namespace

Tensor& fill_rand_(Tensor& t) { return fill_random(t, RandomKind::Uniform); }

Tensor& fill_randn_(Tensor& t) { return fill_random(t, RandomKind::Normal); }

void skip_random_draws(int64_t numel, DType dtype) {
  TG_CHECK(is_floating(dtype), "[skip_random_draws] expected a floating dtype, got ", dtype_name(dtype));
  Generator::global().reserve(random_blocks(RandomKind::Normal, dtype, numel));
}

}  // namespace tg
