#include "ops/autocast.h"

#include "ops/copy.h"
#include "tensor/check.h"

namespace tg {
namespace {

// Per thread: the autocast dtype of CPU and of CUDA tensors (nullopt: off).
struct AutocastState {
  std::optional<DType> cpu, cuda;
  std::optional<DType>& of(DeviceType t) {
    TG_CHECK(t != DeviceType::Meta, "[autocast] expected a cpu or cuda device, got meta");
    return t == DeviceType::CPU ? cpu : cuda;
  }
};
thread_local AutocastState t_state;

}  // namespace

AutocastGuard::AutocastGuard(Device device, DType dtype, bool enabled) : type_(device.type) {
  TG_CHECK(is_low_precision(dtype), "[autocast] expected float16 or bfloat16, got ", dtype_name(dtype));
  std::optional<DType>& slot = t_state.of(type_);
  previous_ = slot;
  slot = enabled ? std::optional<DType>(dtype) : std::nullopt;
}

AutocastGuard::~AutocastGuard() { t_state.of(type_) = previous_; }

AutocastOffGuard::AutocastOffGuard() : cpu_(t_state.cpu), cuda_(t_state.cuda) {
  t_state.cpu.reset();
  t_state.cuda.reset();
}

AutocastOffGuard::~AutocastOffGuard() {
  t_state.cpu = cpu_;
  t_state.cuda = cuda_;
}

std::optional<DType> autocast_dtype(DeviceType type) { return t_state.of(type); }

std::string autocast_state() {
  std::string out;
  if (t_state.cpu) out += "cpu:" + std::string(dtype_name(*t_state.cpu));
  if (t_state.cuda) out += std::string(out.empty() ? "" : ",") + "cuda:" + std::string(dtype_name(*t_state.cuda));
  return out.empty() ? "off" : out;
}

namespace autocast {

Tensor to_low(const Tensor& t) {
  if (!t.defined() || t.device().is_meta() || !(t.dtype() == kFloat32 || is_low_precision(t.dtype()))) return t;
  const std::optional<DType> target = t_state.of(t.device().type);
  if (!target || t.dtype() == *target) return t;
  return to(t, t.device(), *target);
}

Tensor to_float(const Tensor& t) {
  if (!t.defined() || t.device().is_meta() || !is_low_precision(t.dtype()) || !t_state.of(t.device().type)) return t;
  return to(t, t.device(), kFloat32);
}

}  // namespace autocast
}  // namespace tg
