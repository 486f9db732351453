// Reading and writing tensors in the safetensors format (the file format of Hugging Face and
// PyTorch's safetensors.torch.save_file / load_file).
#pragma once

#include <map>
#include <string>

#include "tensor/device.h"
#include "tensor/tensor.h"

namespace tg {

// Tensors by name, in name order (the order safetensors writes them in).
using TensorDict = std::map<std::string, Tensor>;

// What a safetensors file holds: its tensors and the free-form string metadata.
struct SafetensorsFile {
  TensorDict tensors;
  std::map<std::string, std::string> metadata;
};

// Writes `tensors` (any device, any strides) and `metadata` to `path`: an 8-byte little-endian
// header length, a JSON header (dtype, shape, data_offsets per tensor, "__metadata__") padded
// with spaces to a multiple of 8 bytes, then the row-major data. The file is written under a
// temporary name and renamed into place, so a crash never leaves half a file at `path`.
void save_safetensors(const std::string& path, const TensorDict& tensors,
                      const std::map<std::string, std::string>& metadata = {});

// Reads a safetensors file onto `device`. Dtypes BOOL, I32, I64, F32 and F64 are supported.
// A truncated or damaged file is an error naming the file (and the tensor, where one is at fault).
SafetensorsFile load_safetensors(const std::string& path, Device device = kCPU);

}  // namespace tg
