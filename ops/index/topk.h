// topk: the k largest (or smallest) elements along one dim, with their indices.
#pragma once

#include <cstdint>
#include <utility>

#include "tensor/tensor.h"

namespace tg {

// torch.topk: (values, int64 indices) of the k largest (largest = false: smallest) elements along
// `dim`, shaped like `input` with size k at `dim`. NaN counts as larger than every number, equal
// elements come in index order (lower index first), and the result is always sorted (sorted = false
// allows any order, as in PyTorch). Values get a gradient, scattered back to the chosen positions.
std::pair<Tensor, Tensor> topk(const Tensor& input, int64_t k, int64_t dim = -1, bool largest = true,
                               bool sorted = true);

}  // namespace tg
