// Automatic mixed precision, as torch.autocast: while an AutocastGuard is active for a device type,
// ops on tensors of that device cast their floating inputs by PyTorch's lists for that device type.
// Matrix products, linear layers, convolutions and attention run in the guard's 16-bit dtype
// (tensor cores) on both; the losses run in float32 on both; CUDA's float32 list also holds
// softmax, log-softmax, layer_norm, group_norm and transcendental functions (exp, log, pow, ...),
// which the CPU's list does not. Everything else runs in the dtype of its inputs (binary ops
// promote, so a 16-bit tensor meeting a float32 one gives float32). float64 tensors are never cast.
// The casts are ordinary differentiable ops, so gradients come back in each leaf's own dtype and
// compiled functions trace them like any other op. Backward passes run with autocast off, as in
// PyTorch.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "tensor/tensor.h"

namespace tg {

// This thread's autocast dtype per device type (nullopt: off): the state compiled code is traced under.
struct AutocastDtypes {
  std::optional<DType> cpu, cuda;
  bool operator==(const AutocastDtypes&) const = default;
};

// Turns autocast on (or, with enabled = false, off) for `device`'s type on this thread until the
// guard ends; `dtype` is float16 or bfloat16. Guards nest.
class AutocastGuard {
 public:
  AutocastGuard(Device device, DType dtype, bool enabled = true);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  DeviceType type_;
  std::optional<DType> previous_;
};

// Turns autocast off for every device type on this thread until the guard ends (backward passes).
class AutocastOffGuard {
 public:
  AutocastOffGuard();
  ~AutocastOffGuard();
  AutocastOffGuard(const AutocastOffGuard&) = delete;
  AutocastOffGuard& operator=(const AutocastOffGuard&) = delete;

 private:
  AutocastDtypes saved_;
};

// The dtype autocast casts to on devices of `type` now, or nullopt when it is off there.
std::optional<DType> autocast_dtype(DeviceType type);
// This thread's autocast dtypes for every device type.
AutocastDtypes autocast_dtypes();
// "off", or each device type's autocast dtype ("cuda:bfloat16").
std::string autocast_state(const AutocastDtypes& state = autocast_dtypes());

namespace autocast {
// Which device types list an op: PyTorch keeps one list per device type, and they differ (CUDA's
// float32 list holds exp, log, softmax and layer_norm; the CPU's holds none of them).
enum Lists : uint8_t { kCudaList = 1, kCpuList = 2, kBothLists = kCudaList | kCpuList };
// For ops of the low-precision list: a float32 or 16-bit t cast to its device's autocast dtype; t
// itself when autocast is off there, t is not such a tensor, or t's device type is not in `lists`.
Tensor to_low(const Tensor& t, Lists lists = kBothLists);
// For ops of the float32 list: a 16-bit t cast to float32 when autocast is on for its device and
// its device type is in `lists`.
Tensor to_float(const Tensor& t, Lists lists = kBothLists);
// True when autocast is on for t's device type and that type is in `lists`.
bool active_for(const Tensor& t, Lists lists = kBothLists);
}  // namespace autocast

}  // namespace tg
