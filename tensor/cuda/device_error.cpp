// The per-device error records of tensor/cuda/device_error.h and their host-side checks.
#include "tensor/cuda/device_error.h"

#include <array>
#include <atomic>
#include <mutex>
#include <string>

#include "tensor/cuda/cuda_check.h"
#include "tensor/cuda/device_guard.h"

namespace tg::cuda {
namespace {

constexpr int kMaxDevices = 64;

std::array<std::atomic<DeviceErrorRecord*>, kMaxDevices> g_records{};
std::mutex g_records_mutex;

// Allows cudaMalloc and friends on this thread while another stream may be capturing a graph.
class RelaxedCaptureMode {
 public:
  RelaxedCaptureMode() { TG_CUDA_CHECK(cudaThreadExchangeStreamCaptureMode(&mode_)); }
  ~RelaxedCaptureMode() { (void)cudaThreadExchangeStreamCaptureMode(&mode_); }
  RelaxedCaptureMode(const RelaxedCaptureMode&) = delete;
  RelaxedCaptureMode& operator=(const RelaxedCaptureMode&) = delete;

 private:
  cudaStreamCaptureMode mode_ = cudaStreamCaptureModeRelaxed;
};

void check_index(int device) {
  TG_CHECK(device >= 0 && device < kMaxDevices, "[cuda] device index ", device, " is outside [0, ", kMaxDevices, ")");
}

// Zeroes `record` on a private non-blocking stream: no capture records it and no stream waits.
void zero_record(DeviceErrorRecord* record) {
  cudaStream_t side = nullptr;
  TG_CUDA_CHECK(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking));
  TG_CUDA_CHECK(cudaMemsetAsync(record, 0, sizeof(DeviceErrorRecord), side));
  TG_CUDA_CHECK(cudaStreamSynchronize(side));
  TG_CUDA_CHECK(cudaStreamDestroy(side));
}

const char* op_name(int32_t op) {
  switch (static_cast<DeviceErrorOp>(op)) {
    case DeviceErrorOp::IndexSelect: return "index_select";
    case DeviceErrorOp::IndexAdd: return "index_add";
    case DeviceErrorOp::NllLoss: return "nll_loss";
    case DeviceErrorOp::NllLossBackward: return "nll_loss_backward";
    case DeviceErrorOp::MultinomialBadWeight:
    case DeviceErrorOp::MultinomialZeroSum: return "multinomial";
    case DeviceErrorOp::LinearCrossEntropy: return "linear_cross_entropy";
    case DeviceErrorOp::LinearCrossEntropyBackward: return "linear_cross_entropy_backward";
    case DeviceErrorOp::None: break;
  }
  return "unknown op";
}

}  // namespace

DeviceErrorRecord* device_error_record(int device) {
  check_index(device);
  if (DeviceErrorRecord* r = g_records[static_cast<size_t>(device)].load(std::memory_order_acquire)) return r;
  std::lock_guard<std::mutex> lock(g_records_mutex);
  if (DeviceErrorRecord* r = g_records[static_cast<size_t>(device)].load(std::memory_order_acquire)) return r;
  DeviceGuard guard(device);
  RelaxedCaptureMode relaxed;
  void* p = nullptr;
  TG_CUDA_CHECK(cudaMalloc(&p, sizeof(DeviceErrorRecord)));
  auto* r = static_cast<DeviceErrorRecord*>(p);
  zero_record(r);
  g_records[static_cast<size_t>(device)].store(r, std::memory_order_release);
  return r;
}

const DeviceErrorRecord* enqueue_device_error_read(int device, cudaStream_t stream) {
  if (device < 0 || device >= kMaxDevices) return nullptr;
  DeviceErrorRecord* r = g_records[static_cast<size_t>(device)].load(std::memory_order_acquire);
  if (r == nullptr) return nullptr;
  // One pinned slot per thread (copies of concurrent threads never share it), kept for its life.
  thread_local DeviceErrorRecord* slot = [] {
    void* p = nullptr;
    RelaxedCaptureMode relaxed;
    TG_CUDA_CHECK(cudaMallocHost(&p, sizeof(DeviceErrorRecord)));
    return static_cast<DeviceErrorRecord*>(p);
  }();
  TG_CUDA_CHECK(cudaMemcpyAsync(slot, r, sizeof(DeviceErrorRecord), cudaMemcpyDeviceToHost, stream));
  return slot;
}

void raise_device_error(int device, const DeviceErrorRecord* seen) {
  if (seen == nullptr || seen->op <= 0) return;  // none, or a report still being written
  const DeviceErrorRecord e = *seen;
  {
    DeviceGuard guard(device);
    RelaxedCaptureMode relaxed;
    zero_record(device_error_record(device));
  }
  const char* op = op_name(e.op);
  const std::string origin = " (reported by a kernel on cuda:" + std::to_string(device) + ")";
  switch (static_cast<DeviceErrorOp>(e.op)) {
    case DeviceErrorOp::IndexSelect:
    case DeviceErrorOp::IndexAdd:
      TG_FAIL("[", op, "] index ", e.value, " is out of range for dimension ", e.dim, " with size ", e.bound,
              " (index out of range in self)", origin);
    case DeviceErrorOp::NllLoss:
    case DeviceErrorOp::NllLossBackward:
    case DeviceErrorOp::LinearCrossEntropy:
    case DeviceErrorOp::LinearCrossEntropyBackward:
      TG_FAIL("[", op, "] target ", e.value, " is out of range for ", e.bound, " classes (at batch index ", e.where,
              ")", origin);
    case DeviceErrorOp::MultinomialBadWeight:
      TG_FAIL("[", op, "] probability tensor contains either inf, nan or element < 0 (row ", e.where, ", category ",
              e.value, ")", origin);
    case DeviceErrorOp::MultinomialZeroSum:
      TG_FAIL("[", op, "] invalid multinomial distribution (sum of probabilities <= 0) in row ", e.where, origin);
    case DeviceErrorOp::None: break;
  }
  TG_FAIL("[cuda] a kernel reported an error of unknown kind ", e.op, origin);
}

void check_device_error(int device) {
  if (device < 0 || device >= kMaxDevices) return;
  DeviceErrorRecord* r = g_records[static_cast<size_t>(device)].load(std::memory_order_acquire);
  if (r == nullptr) return;
  DeviceErrorRecord seen{};
  DeviceGuard guard(device);
  TG_CUDA_CHECK(cudaMemcpy(&seen, r, sizeof(DeviceErrorRecord), cudaMemcpyDeviceToHost));
  raise_device_error(device, &seen);
}

}  // namespace tg::cuda
