// See Note [Low precision] in docs/low_precision.md.
#include "optim/grad_scaler.h"

#include "ops/elementwise/binary.h"
#include "ops/elementwise/compare.h"
#include "ops/elementwise/copy.h"
#include "ops/factory/factory.h"
#include "ops/reduce/reduce.h"
#include "tensor/grad_mode.h"

namespace tg::optim {

GradScaler::GradScaler(Device device, GradScalerOptions options) : options_(options) {
  TG_CHECK(options.init_scale > 0 && options.growth_factor > 1.0 && options.backoff_factor > 0 &&
               options.backoff_factor < 1.0 && options.growth_interval > 0,
           "[GradScaler] expected init_scale > 0, growth_factor > 1, 0 < backoff_factor < 1 and growth_interval > 0, "
           "got ", options.init_scale, ", ", options.growth_factor, ", ", options.backoff_factor, " and ",
           options.growth_interval);
  const TensorOptions on_device{.dtype = kFloat32, .device = device};
  scale_ = full({}, options.init_scale, on_device);
  found_inf_ = zeros({}, on_device);
  growth_tracker_ = zeros({}, on_device);
}

Tensor GradScaler::scale(const Tensor& loss) const {
  if (!options_.enabled) return loss;
  TG_CHECK(loss.device() == scale_.device(), "[GradScaler] the loss is on ", loss.device().str(),
           " but the scaler's state is on ", scale_.device().str());
  return mul(loss, scale_.to(loss.dtype()));
}

void GradScaler::unscale_(Optimizer& optimizer) {
  if (!options_.enabled) return;
  TG_CHECK(!unscaled_, "[GradScaler] unscale_() was already called since the last update()");
  NoGradGuard no_grad;
  const Tensor inverse = div(full_like(scale_, 1.0), scale_);
  for (const Tensor& p : optimizer.params()) {
    Tensor g = p.grad();
    if (!g.defined()) continue;
    TG_CHECK(g.device() == scale_.device(), "[GradScaler] a gradient is on ", g.device().str(),
             " but the scaler's state is on ", scale_.device().str());
    g.mul_(inverse.to(g.dtype()));
    // The sum of an inf or NaN is not finite, and a non-finite s makes s * 0 a NaN, which is != 0.
    const Tensor total = sum(g, {}, false, kFloat32);
    const Tensor bad = ne(mul(total, 0.0), 0.0).to(kFloat32);
    copy_(found_inf_, maximum(found_inf_, bad));
  }
  unscaled_ = true;
}

void GradScaler::step(Optimizer& optimizer) {
  if (!options_.enabled) return optimizer.step();
  if (!unscaled_) unscale_(optimizer);
  optimizer.set_skip_if(found_inf_);
  try {
    optimizer.step();
  } catch (...) {
    optimizer.set_skip_if(Tensor());
    throw;
  }
  optimizer.set_skip_if(Tensor());
}

void GradScaler::update() {
  if (!options_.enabled) return;
  NoGradGuard no_grad;
  const Tensor found = gt(found_inf_, 0.0);
  const Tensor streak = where(found, zeros_like(growth_tracker_), add(growth_tracker_, 1.0));
  const Tensor grow = ge(streak, static_cast<double>(options_.growth_interval));
  const Tensor next_scale = where(found, mul(scale_, options_.backoff_factor),
                                  where(grow, mul(scale_, options_.growth_factor), scale_));
  copy_(scale_, next_scale);
  copy_(growth_tracker_, where(grow, zeros_like(streak), streak));
  found_inf_.zero_();
  unscaled_ = false;
}

}  // namespace tg::optim
