#include "tensor/device.h"

#include <cstring>
#include <string_view>

#include "tensor/check.h"

namespace tg {

Device::Device(const char* spec) {
  std::string_view s(spec);
  if (s == "cpu") {
    type = DeviceType::CPU;
  } else if (s == "meta") {
    type = DeviceType::Meta;
  } else if (s.starts_with("cuda")) {
    type = DeviceType::CUDA;
    if (s.size() > 4) {
      TG_CHECK(s[4] == ':' && s.size() > 5, "[device] expected 'cuda' or 'cuda:N', got '", s, "'");
      int idx = 0;
      for (char c : s.substr(5)) {
        TG_CHECK(c >= '0' && c <= '9', "[device] expected 'cuda' or 'cuda:N', got '", s, "'");
        idx = idx * 10 + (c - '0');
      }
      index = static_cast<int8_t>(idx);
    }
  } else {
    TG_FAIL("[device] expected 'cpu', 'cuda', 'cuda:N' or 'meta', got '", s, "'");
  }
}

std::string Device::str() const {
  switch (type) {
    case DeviceType::CPU: return "cpu";
    case DeviceType::Meta: return "meta";
    case DeviceType::CUDA: return "cuda:" + std::to_string(index);
  }
  return "unknown";
}

}  // namespace tg
