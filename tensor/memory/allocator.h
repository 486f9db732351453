// The allocator interface behind every storage, and the device-to-allocator lookup.
#pragma once

#include <cstddef>
#include <cstdint>

#include "tensor/device.h"

namespace tg {

// Hands out raw memory for one device; storages return it through deallocate().
class Allocator {
 public:
  virtual ~Allocator() = default;
  // Returns at least nbytes of memory on `device` (nullptr for 0 bytes).
  virtual void* allocate(size_t nbytes, Device device) = 0;
  // Returns memory obtained from allocate(); ptr may be nullptr.
  virtual void deallocate(void* ptr) = 0;
  // deallocate() of a block allocate() was asked `nbytes` for: an allocator that keeps blocks by
  // size may keep this one without looking its size up.
  virtual void deallocate_sized(void* ptr, size_t nbytes) {
    (void)nbytes;
    deallocate(ptr);
  }
};

// The allocator for `device` (CPU: cpu_allocator(); CUDA: the caching allocator).
Allocator* allocator_for(Device device);

// Installs the allocator used for CUDA devices (called by the CUDA backend at start-up).
void set_cuda_allocator(Allocator* allocator);

}  // namespace tg
