#include "optim/device_scalar.h"

#include "ops/core/dispatch.h"
#include "ops/factory/factory.h"
#include "tensor/grad_mode.h"

namespace tg::optim {

DeviceScalar::DeviceScalar(std::string name, double value, DType dtype) : host_(std::move(name), value), dtype_(dtype) {
  TG_CHECK(dtype == kFloat32 || dtype == kFloat64, "[DeviceScalar] '", host_.name(),
           "' must be float32 or float64, got ", dtype_name(dtype));
}

void DeviceScalar::set(double value) {
  host_.set(value);
  NoGradGuard no_grad;
  for (Tensor& copy : copies_) copy.fill_(value);
}

Tensor DeviceScalar::on(Device device) {
  for (const Tensor& copy : copies_)
    if (copy.device() == device) return copy;
  // Made with tracing paused: a factory traced here would become a graph constant holding today's value.
  OpObserverGuard not_traced(nullptr);
  NoGradGuard no_grad;
  copies_.push_back(full({}, host_.peek(), {.dtype = dtype_, .device = device}));
  return copies_.back();
}

}  // namespace tg::optim
