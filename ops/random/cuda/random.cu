// Random kernels: each thread draws one Philox4x32-10 block with curand's device API and maps it
// with the same distribution functors as the CPU loop (ops/random/random_dist.h), so a tensor drawn
// from (seed, offset) is identical on CPU and CUDA.
#include <curand_kernel.h>

#include <cstdint>

#include "ops/random/cuda/random.h"
#include "ops/random/random_dist.h"
#include "tensor/cuda/cuda_check.h"

namespace tg {
namespace {

constexpr int kThreads = 256;

// The elements of one Philox block, stored with one vector write (16 bytes for float32 uniform).
template <typename T, int N>
struct alignas(sizeof(T) * N) Pack {
  T v[N];
};

// One Philox block per thread. curand_init costs a few extra block computations, but neighbouring
// threads then write neighbouring packs; on an H200 this beat amortizing the init over several
// blocks per thread (whose strided stores cut write bandwidth to a third).
template <typename T, typename Block>
__global__ void philox_kernel(T* out, int64_t n, int64_t blocks, uint64_t seed, uint64_t offset,
                              const int64_t* replay_shift, bool aligned, Block block) {
  constexpr int per = Block::kPerBlock;
  const int64_t b = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (b >= blocks) return;
  // Inside a replayed CUDA graph, every replay moves the draws to fresh counters of the current seed.
  if (replay_shift) {
    offset += static_cast<uint64_t>(replay_shift[0]);
    seed = static_cast<uint64_t>(replay_shift[1]);
  }
  curandStatePhilox4_32_10_t state;
  // Block b is the Philox output at counter offset + b: offset 4 * (offset + b) in 32-bit draws.
  curand_init(seed, 0, 4 * (offset + static_cast<uint64_t>(b)), &state);
  const uint4 r = curand4(&state);
  const uint32_t w[4] = {r.x, r.y, r.z, r.w};
  T v[4];
  block(w, v);
  const int64_t base = b * per;
  if (aligned && base + per <= n) {
    Pack<T, per> p;
#pragma unroll
    for (int j = 0; j < per; ++j) p.v[j] = v[j];
    *reinterpret_cast<Pack<T, per>*>(out + base) = p;
  } else {
    for (int j = 0; j < per && base + j < n; ++j) out[base + j] = v[j];
  }
}

template <typename T, typename Block>
void launch(void* out, int64_t n, PhiloxState state, Block block) {
  if (n == 0) return;
  const int64_t blocks = (n + Block::kPerBlock - 1) / Block::kPerBlock;
  const bool aligned = reinterpret_cast<uintptr_t>(out) % sizeof(Pack<T, Block::kPerBlock>) == 0;
  const int64_t* replay_shift = nullptr;
  if (CaptureRandomness* capture = current_capture_randomness()) {
    replay_shift = capture->device_shift;
    capture->note(state.offset, static_cast<uint64_t>(blocks));
  }
  philox_kernel<T, Block><<<cuda::blocks_for(blocks, kThreads), kThreads, 0, cuda::current_stream()>>>(
      static_cast<T*>(out), n, blocks, state.seed, state.offset, replay_shift, aligned, block);
  TG_CUDA_CHECK_LAUNCH();
}

}  // namespace

void philox_uniform_cuda(void* out, DType dtype, int64_t n, PhiloxState state) {
  TG_DISPATCH_FLOATING(dtype, "rand", [&] { launch<scalar_t>(out, n, state, UniformBlock<scalar_t>{}); });
}

void philox_normal_cuda(void* out, DType dtype, int64_t n, PhiloxState state) {
  TG_DISPATCH_FLOATING(dtype, "randn", [&] { launch<scalar_t>(out, n, state, NormalBlock<scalar_t>{}); });
}

void philox_randint_cuda(void* out, DType dtype, int64_t n, int64_t low, uint64_t range, PhiloxState state) {
  TG_DISPATCH_ALL(dtype, "randint", [&] { launch<scalar_t>(out, n, state, RandintBlock<scalar_t>{low, range}); });
}

}  // namespace tg
