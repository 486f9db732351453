// Page-locked (pinned) host memory and a copy stream, for asynchronous host-to-device transfers.
#pragma once

#include <memory>

#include "tensor/tensor.h"

namespace tg::cuda {

// A CPU tensor over page-locked memory when CUDA is available (ordinary memory otherwise), so that
// copies from it to a device run asynchronously.
Tensor empty_pinned(const Shape& sizes, DType dtype);

// A marker in a stream's work; the host can wait for it.
class CopyEvent {
 public:
  CopyEvent() = default;
  explicit CopyEvent(std::shared_ptr<void> event) : event_(std::move(event)) {}
  // Blocks until the work before the marker is done (returns at once for an empty event).
  void synchronize() const;

 private:
  std::shared_ptr<void> event_;
};

// A non-blocking CUDA stream for copies beside the compute (current) stream of `device`.
class CopyStream {
 public:
  // Errors when CUDA is not available.
  explicit CopyStream(int device);
  ~CopyStream();
  CopyStream(const CopyStream&) = delete;
  CopyStream& operator=(const CopyStream&) = delete;

  // Copies contiguous host `src` into contiguous device `dst` of the same size on this stream. The
  // copy starts after the work queued so far on the current stream (dst comes from the
  // stream-ordered allocator) and the current stream waits for it; the host does not. The event
  // marks the copy's end: wait on it before writing into `src` again.
  CopyEvent copy_to_device(const Tensor& dst, const Tensor& src);

 private:
  int device_;
  void* stream_ = nullptr;
};

}  // namespace tg::cuda
