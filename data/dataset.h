// TensorDataset: samples are the rows (first dimension) of one or more tensors of equal length.
#pragma once

#include <cstdint>

#include "tensor/tensor.h"

namespace tg::data {

// Sample i is (t[i] for t in tensors), as torch.utils.data.TensorDataset. Tensors are kept on
// the CPU, contiguous, so that a loader can gather rows without running tensor ops.
class TensorDataset {
 public:
  // All tensors must be defined, have at least one dimension and the same size along it.
  explicit TensorDataset(TensorList tensors);
  int64_t size() const { return size_; }
  const TensorList& tensors() const { return tensors_; }

 private:
  TensorList tensors_;
  int64_t size_ = 0;
};

}  // namespace tg::data
