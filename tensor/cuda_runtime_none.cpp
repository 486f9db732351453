// Host builds without the CUDA backend: no device exists, and every CUDA request says so.
#include "tensor/check.h"
#include "tensor/cuda_runtime.h"

namespace tg {

bool cuda_is_available() { return false; }
int cuda_device_count() { return 0; }

namespace cuda {

namespace {
[[noreturn]] void no_cuda(const char* what) {
  TG_FAIL("[", what, "] a CUDA device was requested, but tapegraph was built without CUDA support");
}
}  // namespace

void memcpy(void*, Device, const void*, Device, int64_t) { no_cuda("copy"); }
void synchronize(int) { no_cuda("synchronize"); }
void set_device(int) { no_cuda("set_device"); }
int current_device() { no_cuda("current_device"); }
void join_forked_work() {}
double device_time_ms(const std::function<void()>&, int) { no_cuda("device_time_ms"); }

}  // namespace cuda
}  // namespace tg
