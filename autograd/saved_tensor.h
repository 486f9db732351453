// A tensor kept on the tape for backward, with the version it had when saved.
#pragma once

#include <memory>
#include <string>

#include "tensor/tensor.h"

namespace tg {

class Node;
class CheckpointFrame;

// Saves a tensor for backward; unpack() fails clearly if it was modified in place or freed.
class SavedTensor {
 public:
  SavedTensor() = default;
  // is_output: the tensor is an output of `owner`; it is stored without a strong reference back
  // to its grad_fn (the owner) so that the tape has no reference cycle.
  // While a checkpointed function runs forward, only a place in its frame is kept (see
  // autograd/checkpoint.h); the frame's recomputation fills it.
  SavedTensor(const Tensor& t, bool is_output);
  // The saved tensor; `owner` re-links saved outputs to their grad_fn. Throws if modified or freed.
  Tensor unpack(const std::shared_ptr<Node>& owner, const char* what) const;
  void release();
  bool defined() const { return data_.defined() || released_ || frame_ != nullptr; }

 private:
  void save(const Tensor& t);

  Tensor data_;
  uint64_t version_ = 0;
  bool is_output_ = false;
  bool requires_grad_ = false;
  std::shared_ptr<Node> grad_fn_;  // a saved non-leaf input's producer when it was saved
  uint32_t output_nr_ = 0;
  bool released_ = false;
  std::shared_ptr<CheckpointFrame> frame_;  // set: the tensor is place `place_` of a checkpoint frame
  size_t place_ = 0;
};

}  // namespace tg
