#include "tensor/memory/allocator.h"

#include "tensor/check.h"
#include "tensor/memory/cpu_allocator.h"

namespace tg {
namespace {

Allocator* g_cuda_allocator = nullptr;

}  // namespace

Allocator* allocator_for(Device device) {
  switch (device.type) {
    case DeviceType::CPU: return cpu_allocator();
    case DeviceType::CUDA:
      TG_CHECK(g_cuda_allocator != nullptr, "[allocate] device ", device.str(),
               " requested, but tapegraph was built without CUDA support");
      return g_cuda_allocator;
    case DeviceType::Meta: return nullptr;
  }
  return nullptr;
}

void set_cuda_allocator(Allocator* allocator) { g_cuda_allocator = allocator; }

}  // namespace tg
