#include "tensor/allocator.h"

#include <cstdlib>
#include <new>

#include "tensor/check.h"

namespace tg {
namespace {

// 64-byte aligned host memory, so Eigen and vector loads see aligned rows.
class CpuAllocator final : public Allocator {
 public:
  void* allocate(size_t nbytes, Device) override {
    if (nbytes == 0) return nullptr;
    void* p = std::aligned_alloc(64, (nbytes + 63) / 64 * 64);
    if (!p) throw std::bad_alloc();
    return p;
  }
  void deallocate(void* ptr) override { std::free(ptr); }
};

Allocator* g_cuda_allocator = nullptr;

}  // namespace

Allocator* allocator_for(Device device) {
  static CpuAllocator cpu;
  switch (device.type) {
    case DeviceType::CPU: return &cpu;
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
