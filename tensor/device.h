// Where a tensor's data lives: the host, a CUDA device, or nowhere (meta: shapes only).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace tg {

// The kinds of device; meta tensors carry sizes and dtype but no data, and run no kernels.
enum class DeviceType : uint8_t { CPU, CUDA, Meta };

// A device kind plus an index (the CUDA ordinal; 0 elsewhere).
struct Device {
  DeviceType type = DeviceType::CPU;
  int8_t index = 0;

  constexpr Device() = default;
  constexpr Device(DeviceType t, int i = 0) : type(t), index(static_cast<int8_t>(i)) {}
  // Parses "cpu", "cuda", "cuda:1", "meta".
  Device(const char* spec);  // NOLINT: implicit on purpose, like torch.device("cuda")
  Device(const std::string& spec) : Device(spec.c_str()) {}  // NOLINT

  bool is_cpu() const { return type == DeviceType::CPU; }
  bool is_cuda() const { return type == DeviceType::CUDA; }
  bool is_meta() const { return type == DeviceType::Meta; }
  // "cpu", "cuda:0", "meta".
  std::string str() const;
  friend bool operator==(const Device&, const Device&) = default;
};

inline constexpr Device kCPU{DeviceType::CPU, 0};
inline constexpr Device kMeta{DeviceType::Meta, 0};
// The CUDA device with ordinal `index`.
constexpr Device cuda_device(int index = 0) { return Device{DeviceType::CUDA, index}; }

// True when this build has the CUDA backend and at least one device is visible.
bool cuda_is_available();
// Number of visible CUDA devices (0 without the CUDA backend).
int cuda_device_count();

}  // namespace tg
