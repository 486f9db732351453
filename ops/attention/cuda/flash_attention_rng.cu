// The Philox seed and offset that cuDNN's fused attention reads from the device for its dropout.
// Written by a kernel (not a host copy) so that a CUDA graph replay can move them to fresh values.
#include "ops/attention/flash_attention_kernels.h"
#include "tensor/cuda/cuda_check.h"

namespace tg::cuda {
namespace {

__global__ void philox_state_kernel(int64_t* rng, uint64_t seed, uint64_t offset, const int64_t* replay_shift) {
  if (replay_shift) {
    offset += static_cast<uint64_t>(replay_shift[0]);
    seed = static_cast<uint64_t>(replay_shift[1]);
  }
  rng[0] = static_cast<int64_t>(seed);
  rng[1] = static_cast<int64_t>(offset);
}

}  // namespace

void write_philox_state(const Tensor& rng, PhiloxState state, uint64_t blocks) {
  TG_CHECK(rng.dtype() == kInt64 && rng.numel() == 2 && rng.is_contiguous(), "[flash_attention] internal error: ",
           "expected an int64 [2] Philox state");
  const int64_t* replay_shift = nullptr;
  if (CaptureRandomness* capture = current_capture_randomness()) {
    replay_shift = capture->device_shift;
    capture->note(state.offset, blocks);
  }
  philox_state_kernel<<<1, 1, 0, current_stream()>>>(static_cast<int64_t*>(rng.raw_data()), state.seed, state.offset,
                                                     replay_shift);
  TG_CUDA_CHECK_LAUNCH();
}

}  // namespace tg::cuda
