#include "tensor/memory/storage.h"

#include <cstring>

#include "tensor/check.h"
#include "tensor/cuda_runtime.h"

namespace tg {

StorageImpl::StorageImpl(Device device, int64_t nbytes, bool fake)
    : nbytes_(nbytes), device_(device), fake_(fake || device.is_meta()) {
  TG_CHECK(nbytes >= 0, "[storage] expected a non-negative byte count, got ", nbytes);
  if (!fake_ && nbytes > 0) {
    allocator_ = allocator_for(device);
    data_ = allocator_->allocate(static_cast<size_t>(nbytes), device);
  }
}

StorageImpl::StorageImpl(Device device, void* data, int64_t nbytes, std::shared_ptr<void> owner)
    : data_(data), nbytes_(nbytes), device_(device), owner_(std::move(owner)) {}

void StorageImpl::throw_stale() const { throw Error(*stale_message_); }

StorageImpl::~StorageImpl() {
  if (allocator_) allocator_->deallocate_sized(data_, static_cast<size_t>(nbytes_));
}

void StorageImpl::grow(int64_t nbytes) {
  if (nbytes <= nbytes_) return;
  TG_CHECK(!owner_, "[resize_] cannot grow a tensor whose memory belongs to a CUDA graph; clone() it first");
  if (fake_) {
    nbytes_ = nbytes;
    return;
  }
  Allocator* alloc = allocator_for(device_);
  void* fresh = alloc->allocate(static_cast<size_t>(nbytes), device_);
  if (nbytes_ > 0) copy_bytes(fresh, device_, data_, device_, nbytes_);
  if (allocator_) allocator_->deallocate_sized(data_, static_cast<size_t>(nbytes_));
  data_ = fresh;
  allocator_ = alloc;
  nbytes_ = nbytes;
}

void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, int64_t nbytes) {
  if (nbytes == 0) return;
  TG_CHECK(!dst_device.is_meta() && !src_device.is_meta(), "[copy] cannot copy data to or from a meta tensor");
  if (dst_device.is_cpu() && src_device.is_cpu()) {
    std::memcpy(dst, src, static_cast<size_t>(nbytes));
    return;
  }
  cuda::memcpy(dst, dst_device, src, src_device, nbytes);
}

}  // namespace tg
