#include "ops/core/autocast.h"

#include "ops/elementwise/copy.h"
#include "tensor/check.h"

namespace tg {
namespace {

// Per thread: the autocast dtype of CPU and of CUDA tensors (nullopt: off).
thread_local AutocastDtypes t_state;

std::optional<DType>& slot_of(DeviceType t) {
  TG_CHECK(t != DeviceType::Meta, "[autocast] expected a cpu or cuda device, got meta");
  return t == DeviceType::CPU ? t_state.cpu : t_state.cuda;
}

}  // namespace

AutocastGuard::AutocastGuard(Device device, DType dtype, bool enabled) : type_(device.type) {
  TG_CHECK(is_low_precision(dtype), "[autocast] expected float16 or bfloat16, got ", dtype_name(dtype));
  std::optional<DType>& slot = slot_of(type_);
  previous_ = slot;
  slot = enabled ? std::optional<DType>(dtype) : std::nullopt;
}

AutocastGuard::~AutocastGuard() { slot_of(type_) = previous_; }

AutocastOffGuard::AutocastOffGuard() : saved_(t_state) { t_state = {}; }

AutocastOffGuard::~AutocastOffGuard() { t_state = saved_; }

std::optional<DType> autocast_dtype(DeviceType type) { return slot_of(type); }

AutocastDtypes autocast_dtypes() { return t_state; }

std::string autocast_state(const AutocastDtypes& state) {
  std::string out;
  if (state.cpu) out += "cpu:" + std::string(dtype_name(*state.cpu));
  if (state.cuda) out += std::string(out.empty() ? "" : ",") + "cuda:" + std::string(dtype_name(*state.cuda));
  return out.empty() ? "off" : out;
}

namespace autocast {

bool active_for(const Tensor& t, Lists lists) {
  if (!t.defined() || t.device().is_meta()) return false;
  const DeviceType type = t.device().type;
  const uint8_t bit = type == DeviceType::CUDA ? kCudaList : kCpuList;
  return (lists & bit) != 0 && slot_of(type).has_value();
}

Tensor to_low(const Tensor& t, Lists lists) {
  if (!active_for(t, lists) || !(t.dtype() == kFloat32 || is_low_precision(t.dtype()))) return t;
  const DType target = *slot_of(t.device().type);
  if (t.dtype() == target) return t;
  return to(t, t.device(), target);
}

Tensor to_float(const Tensor& t, Lists lists) {
  if (!active_for(t, lists) || !is_low_precision(t.dtype())) return t;
  return to(t, t.device(), kFloat32);
}

}  // namespace autocast
}  // namespace tg
