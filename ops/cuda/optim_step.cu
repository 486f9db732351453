// The fused optimizer steps on CUDA (Adam, SGD): parameters go to the kernel in groups of kTensorsPerLaunch (their
// pointers passed by value, so a captured launch needs no device-side table); blockIdx.y picks the
// parameter and blocks stride over its elements. The step counts advance in a second, tiny launch
// once every block has read them.
#include "ops/cuda/optim_step.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "tensor/cuda/cuda_check.h"
#include "tensor/cuda/device_guard.h"

namespace tg::cuda {
namespace {

constexpr int kTensorsPerLaunch = 32;
constexpr int kThreads = 256;
constexpr int64_t kMaxBlocksPerTensor = 512;

// The pointers and sizes of up to kTensorsPerLaunch parameters and their state.
template <typename T>
struct AdamGroup {
  T* params[kTensorsPerLaunch];
  const T* grads[kTensorsPerLaunch];
  T* exp_avgs[kTensorsPerLaunch];
  T* exp_avg_sqs[kTensorsPerLaunch];
  T* steps[kTensorsPerLaunch];
  int64_t numel[kTensorsPerLaunch];
  int count;
};

// The hyper-parameters in the kernel's precision.
struct AdamHyper {
  double lr, beta1, beta2, eps, weight_decay;
  bool decoupled;
};

template <typename T>
__global__ void adam_kernel(AdamGroup<T> group, AdamHyper h, const float* skip) {
  if (skip != nullptr && *skip != 0.f) return;
  const int i = static_cast<int>(blockIdx.y);
  const int64_t n = group.numel[i];
  const double t = static_cast<double>(*group.steps[i]) + 1.0;
  const T bias1 = static_cast<T>(1.0 - pow(h.beta1, t));
  const T bias2_sqrt = static_cast<T>(sqrt(1.0 - pow(h.beta2, t)));
  const T lr = static_cast<T>(h.lr), beta1 = static_cast<T>(h.beta1), beta2 = static_cast<T>(h.beta2);
  const T eps = static_cast<T>(h.eps), wd = static_cast<T>(h.weight_decay);
  T* p = group.params[i];
  const T* g = group.grads[i];
  T* m = group.exp_avgs[i];
  T* v = group.exp_avg_sqs[i];
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t j = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; j < n; j += stride) {
    T grad = g[j];
    T param = p[j];
    if (h.decoupled) param *= T(1) - lr * wd;
    else grad += wd * param;
    const T mj = beta1 * m[j] + (T(1) - beta1) * grad;
    const T vj = beta2 * v[j] + (T(1) - beta2) * grad * grad;
    m[j] = mj;
    v[j] = vj;
    p[j] = param - lr / bias1 * mj / (sqrt(vj) / bias2_sqrt + eps);
  }
}

template <typename T>
__global__ void advance_steps_kernel(AdamGroup<T> group, const float* skip) {
  if (skip != nullptr && *skip != 0.f) return;
  const int i = static_cast<int>(threadIdx.x);
  if (i < group.count) *group.steps[i] += T(1);
}

template <typename T>
void launch_groups(const TensorList& params, const TensorList& grads, const TensorList& exp_avgs,
                   const TensorList& exp_avg_sqs, const TensorList& steps, const AdamHyper& h, const float* skip) {
  cudaStream_t stream = current_stream();
  for (size_t first = 0; first < params.size(); first += kTensorsPerLaunch) {
    AdamGroup<T> group{};
    int64_t max_numel = 0;
    for (size_t i = first; i < std::min(params.size(), first + kTensorsPerLaunch); ++i) {
      const int k = group.count++;
      group.params[k] = params[i].data_ptr<T>();
      group.grads[k] = grads[i].data_ptr<T>();
      group.exp_avgs[k] = exp_avgs[i].data_ptr<T>();
      group.exp_avg_sqs[k] = exp_avg_sqs[i].data_ptr<T>();
      group.steps[k] = steps[i].data_ptr<T>();
      group.numel[k] = params[i].numel();
      max_numel = std::max(max_numel, group.numel[k]);
    }
    if (max_numel > 0) {
      const dim3 grid(static_cast<unsigned>(std::min<int64_t>(blocks_for(max_numel, kThreads), kMaxBlocksPerTensor)),
                      static_cast<unsigned>(group.count));
      adam_kernel<T><<<grid, kThreads, 0, stream>>>(group, h, skip);
      TG_CUDA_CHECK_LAUNCH();
    }
    advance_steps_kernel<T><<<1, kTensorsPerLaunch, 0, stream>>>(group, skip);
    TG_CUDA_CHECK_LAUNCH();
  }
}

// The pointers and sizes of up to kTensorsPerLaunch parameters, their grads and momentum buffers.
template <typename T>
struct SgdGroup {
  T* params[kTensorsPerLaunch];
  const T* grads[kTensorsPerLaunch];
  T* buffers[kTensorsPerLaunch];  // null without momentum
  int64_t numel[kTensorsPerLaunch];
  int count;
};

// PyTorch's SGD rule for one element (b: its momentum buffer, null without momentum).
template <typename T>
struct SgdRule {
  T lr, momentum, wd, keep;
  bool nesterov;
  __device__ __forceinline__ void operator()(T& p, T g, T* b) const {
    T d = g + wd * p;
    if (b != nullptr) {
      *b = momentum * *b + keep * d;
      d = nesterov ? d + momentum * *b : *b;
    }
    p -= lr * d;
  }
};

// 16 bytes of T, loaded and stored as one access.
template <typename T>
struct alignas(16) Pack16 {
  static constexpr int kSize = 16 / static_cast<int>(sizeof(T));
  T v[kSize];
};

template <typename T>
__global__ void sgd_kernel(SgdGroup<T> group, SgdStepOptions o, const float* skip) {
  if (skip != nullptr && *skip != 0.f) return;
  const int i = static_cast<int>(blockIdx.y);
  const int64_t n = group.numel[i];
  const SgdRule<T> rule{static_cast<T>(o.lr), static_cast<T>(o.momentum), static_cast<T>(o.weight_decay),
                        static_cast<T>(1.0 - o.dampening), o.nesterov};
  T* p = group.params[i];
  const T* g = group.grads[i];
  T* buf = group.buffers[i];
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  // 16-byte accesses over the aligned bulk (a memory-bound update: fewer, wider loads), then the rest.
  using P = Pack16<T>;
  const auto address = [](const void* ptr) { return reinterpret_cast<uintptr_t>(ptr); };
  const bool aligned = (address(p) | address(g) | address(buf)) % 16 == 0;
  const int64_t packs = aligned ? n / P::kSize : 0;
  for (int64_t v = first; v < packs; v += stride) {
    P pv = reinterpret_cast<const P*>(p)[v];
    const P gv = reinterpret_cast<const P*>(g)[v];
    P bv;
    if (buf != nullptr) bv = reinterpret_cast<const P*>(buf)[v];
#pragma unroll
    for (int k = 0; k < P::kSize; ++k) rule(pv.v[k], gv.v[k], buf != nullptr ? &bv.v[k] : nullptr);
    reinterpret_cast<P*>(p)[v] = pv;
    if (buf != nullptr) reinterpret_cast<P*>(buf)[v] = bv;
  }
  for (int64_t j = packs * P::kSize + first; j < n; j += stride) rule(p[j], g[j], buf != nullptr ? buf + j : nullptr);
}

template <typename T>
void launch_sgd_groups(const TensorList& params, const TensorList& grads, const TensorList& buffers,
                       const SgdStepOptions& o, const float* skip) {
  cudaStream_t stream = current_stream();
  for (size_t first = 0; first < params.size(); first += kTensorsPerLaunch) {
    SgdGroup<T> group{};
    int64_t max_numel = 0;
    for (size_t i = first; i < std::min(params.size(), first + kTensorsPerLaunch); ++i) {
      const int k = group.count++;
      group.params[k] = params[i].data_ptr<T>();
      group.grads[k] = grads[i].data_ptr<T>();
      group.buffers[k] = buffers.empty() ? nullptr : buffers[i].data_ptr<T>();
      group.numel[k] = params[i].numel();
      max_numel = std::max(max_numel, group.numel[k]);
    }
    if (max_numel == 0) continue;
    const dim3 grid(static_cast<unsigned>(std::min<int64_t>(blocks_for(max_numel, kThreads), kMaxBlocksPerTensor)),
                    static_cast<unsigned>(group.count));
    sgd_kernel<T><<<grid, kThreads, 0, stream>>>(group, o, skip);
    TG_CUDA_CHECK_LAUNCH();
  }
}

}  // namespace

void sgd_step(const TensorList& params, const TensorList& grads, const TensorList& momentum_buffers,
              const SgdStepOptions& options, const Tensor& skip_if) {
  DeviceGuard device(params[0].device().index);
  const float* skip = skip_if.defined() ? skip_if.data_ptr<float>() : nullptr;
  TG_DISPATCH_FLOAT_DOUBLE(params[0].dtype(), "sgd_step_",
                       [&] { launch_sgd_groups<scalar_t>(params, grads, momentum_buffers, options, skip); });
}

void adam_step(const TensorList& params, const TensorList& grads, const TensorList& exp_avgs,
               const TensorList& exp_avg_sqs, const TensorList& steps, const AdamStepOptions& options,
               const Tensor& skip_if) {
  DeviceGuard device(params[0].device().index);
  const float* skip = skip_if.defined() ? skip_if.data_ptr<float>() : nullptr;
  const AdamHyper h{options.lr, options.beta1, options.beta2, options.eps, options.weight_decay, options.decoupled};
  TG_DISPATCH_FLOAT_DOUBLE(params[0].dtype(), "adam_step_",
                       [&] { launch_groups<scalar_t>(params, grads, exp_avgs, exp_avg_sqs, steps, h, skip); });
}

}  // namespace tg::cuda
