// A reference-counted block of memory shared by a tensor and all of its views.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "tensor/device.h"
#include "tensor/memory/allocator.h"

namespace tg {

// Owns one allocation; views share it, and its version counter records every in-place write.
class StorageImpl {
 public:
  // Allocates nbytes on device; a fake storage (tracing) or a meta device holds no data.
  StorageImpl(Device device, int64_t nbytes, bool fake = false);
  // A storage over memory owned by someone else (a CUDA graph's output buffer); `owner` keeps that
  // memory alive for as long as this storage exists.
  StorageImpl(Device device, void* data, int64_t nbytes, std::shared_ptr<void> owner);
  ~StorageImpl();
  StorageImpl(const StorageImpl&) = delete;
  StorageImpl& operator=(const StorageImpl&) = delete;

  void* data() const { return data_; }
  int64_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }
  // True when there is no data behind this storage (meta device or a fake tensor being traced).
  bool is_fake() const { return fake_; }
  // Grows the allocation to at least nbytes, keeping the old contents (resize_ needs this).
  void grow(int64_t nbytes);

  // True for storages over memory owned elsewhere (outputs of CUDA graphs).
  bool is_borrowed() const { return owner_ != nullptr; }
  // Marks the memory as overwritten by someone else (a later CUDA graph replay): any further data
  // access through this storage throws `message`, and a borrowed storage stops holding the memory.
  void invalidate(std::string message) {
    stale_message_ = std::make_unique<std::string>(std::move(message));
    owner_.reset();
  }
  // True after invalidate().
  bool is_stale() const { return stale_message_ != nullptr; }
  // Throws the invalidation message (call only when is_stale()).
  [[noreturn]] void throw_stale() const;

  // Declares that this memory keeps its address from call to call (a buffer that is refilled in
  // place): CUDA graphs read tensors over it where they are instead of copying them in.
  void mark_static_address() { static_address_ = true; }
  bool has_static_address() const { return static_address_; }

  // Bumped by every in-place write to any tensor over this storage.
  uint64_t version() const { return version_; }
  void bump_version() { ++version_; }

 private:
  void* data_ = nullptr;
  int64_t nbytes_ = 0;
  Device device_;
  Allocator* allocator_ = nullptr;
  bool fake_ = false;
  bool static_address_ = false;
  uint64_t version_ = 0;
  std::shared_ptr<void> owner_;
  std::unique_ptr<std::string> stale_message_;
};

using Storage = std::shared_ptr<StorageImpl>;

// Copies nbytes between two raw pointers on the given devices (host, device or across).
void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, int64_t nbytes);

}  // namespace tg
