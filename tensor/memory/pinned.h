// Page-locked (pinned) host memory and a copy stream, for asynchronous host-to-device transfers.
#pragma once

#include <memory>

#include "tensor/tensor.h"

namespace tg::cuda {

// A CPU tensor over page-locked memory when CUDA is available (ordinary memory otherwise), so that
// copies from it to a device run asynchronously.
Tensor empty_pinned(const Shape& sizes, DType dtype);

// A marker in a stream's work, made on first use and moved by each record(); the host can wait for it.
class CopyEvent {
 public:
  // Marks the end of the work queued so far on `stream` (a cudaStream_t; null: the current stream).
  void record(void* stream = nullptr);
  // Blocks until the work before the marker is done (returns at once when nothing was recorded).
  void synchronize() const;
  // The underlying cudaEvent_t (null before the first record()).
  void* handle() const { return event_.get(); }

 private:
  std::shared_ptr<void> event_;
};

// Copies contiguous host tensors `src` into contiguous device tensors `dst` (same sizes and dtypes)
// on the current stream, after the work queued on it so far; `done` marks their end: wait on it
// before writing into `src` again.
void copy_to_device(const TensorList& dst, const TensorList& src, CopyEvent& done);

// A non-blocking CUDA stream for copies beside the compute (current) stream of `device`.
class CopyStream {
 public:
  // Errors when CUDA is not available.
  explicit CopyStream(int device);
  ~CopyStream();
  CopyStream(const CopyStream&) = delete;
  CopyStream& operator=(const CopyStream&) = delete;

  // copy_to_device() on this stream: the copies start after the work queued so far on the current
  // stream (the destinations come from the stream-ordered allocator) and the current stream waits
  // for them; the host does not.
  void copy_to_device(const TensorList& dst, const TensorList& src, CopyEvent& done);

 private:
  int device_;
  void* stream_ = nullptr;
  CopyEvent compute_ready_;  // the current stream's work before a copy
};

}  // namespace tg::cuda
