#include "data/dataset.h"

#include "tensor/check.h"

namespace tg::data {

TensorDataset::TensorDataset(TensorList tensors) {
  TG_CHECK(!tensors.empty(), "[TensorDataset] expected at least one tensor");
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    TG_CHECK(t.defined() && t.dim() >= 1, "[TensorDataset] tensor ", i, " must be defined with at least 1 dimension");
    TG_CHECK(t.size(0) == tensors[0].size(0), "[TensorDataset] tensor ", i, " has ", t.size(0),
             " rows but tensor 0 has ", tensors[0].size(0));
    tensors_.push_back(t.detach().to(kCPU).contiguous());
  }
  size_ = tensors_[0].size(0);
}

}  // namespace tg::data
