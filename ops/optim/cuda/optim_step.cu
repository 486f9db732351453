// The fused optimizer steps on CUDA (Adam, SGD) as multi-tensor kernels: one launch updates every
// parameter of a list. The launch's table (each parameter's pointers, size and first chunk) goes to
// the kernel by value, so a captured launch needs no device-side table; every block updates one
// chunk of kChunk elements of one parameter, found by a binary search of the first chunks. Adam's step
// counts advance in a second, tiny launch once every block has read them. Hyperparameters given as
// device scalars (the learning rate, betas, eps, momentum, dampening, weight decay) are read by every
// block when it runs, so a recorded launch follows later changes.
#include "ops/optim/cuda/optim_step.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "tensor/cuda/cuda_check.h"
#include "tensor/cuda/device_guard.h"
#include "tensor/half.h"

namespace tg::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kChunk = 8192;  // elements one block updates
// Parameters one launch takes: a small table for small models (less to copy per launch) and a large
// one that stays inside CUDA's 32 KB kernel-parameter limit.
constexpr int kSmallTable = 32;
constexpr int kLargeTable = 384;

// One launch's parameters: kLists lists of data (list 0 the parameters), Adam's step counts when it
// has them, each parameter's size and first chunk (first_chunk[count] is the grid size).
template <typename T, int kLists, int kCapacity>
struct TensorTable {
  static constexpr int kSize = kCapacity;
  T* data[kLists][kCapacity];  // grads are never written, but share the lists' type
  float* steps[kCapacity];     // null for SGD
  int64_t numel[kCapacity];
  int first_chunk[kCapacity + 1];
  int count;
};

// The parameter whose chunk this block updates: the last one whose first chunk is at or before it
// (parameters without elements own no chunk, so a later one always wins).
template <typename Table>
__device__ int tensor_of_block(const Table& table) {
  const int block = static_cast<int>(blockIdx.x);
  int lo = 0, hi = table.count - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (table.first_chunk[mid] <= block) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

// 16 bytes of T, loaded and stored as one access.
template <typename T>
struct alignas(16) Pack16 {
  static constexpr int kSize = 16 / static_cast<int>(sizeof(T));
  T v[kSize];
};

// Applies `rule` to elements [begin, end) of every list: rule(x) updates x[k] (list k's element, in
// the compute type) and Rule::kWritten's bits name the lists stored back. The aligned bulk moves in
// 16-byte accesses (the update is memory-bound), the rest one element at a time.
template <typename T, int kLists, typename Rule>
__device__ void update_range(T* const (&ptrs)[kLists], int64_t begin, int64_t end, const Rule& rule) {
  using C = acc_type<T>;
  using P = Pack16<T>;
  bool aligned = true;
#pragma unroll
  for (int k = 0; k < kLists; ++k) aligned &= reinterpret_cast<uintptr_t>(ptrs[k] + begin) % 16 == 0;
  const int64_t bulk_end = aligned ? begin + (end - begin) / P::kSize * P::kSize : begin;
  for (int64_t j = begin + threadIdx.x * P::kSize; j < bulk_end; j += static_cast<int64_t>(blockDim.x) * P::kSize) {
    P packs[kLists];
#pragma unroll
    for (int k = 0; k < kLists; ++k) packs[k] = *reinterpret_cast<const P*>(ptrs[k] + j);
#pragma unroll
    for (int e = 0; e < P::kSize; ++e) {
      C x[kLists];
#pragma unroll
      for (int k = 0; k < kLists; ++k) x[k] = static_cast<C>(packs[k].v[e]);
      rule(x);
#pragma unroll
      for (int k = 0; k < kLists; ++k)
        if (Rule::kWritten & (1 << k)) packs[k].v[e] = static_cast<T>(x[k]);
    }
#pragma unroll
    for (int k = 0; k < kLists; ++k)
      if (Rule::kWritten & (1 << k)) *reinterpret_cast<P*>(ptrs[k] + j) = packs[k];
  }
  for (int64_t j = bulk_end + threadIdx.x; j < end; j += blockDim.x) {
    C x[kLists];
#pragma unroll
    for (int k = 0; k < kLists; ++k) x[k] = static_cast<C>(ptrs[k][j]);
    rule(x);
#pragma unroll
    for (int k = 0; k < kLists; ++k)
      if (Rule::kWritten & (1 << k)) ptrs[k][j] = static_cast<T>(x[k]);
  }
}

// The parameter and element range of this block's chunk.
struct Chunk {
  int tensor;
  int64_t begin, end;
};

template <typename Table>
__device__ Chunk chunk_of_block(const Table& table) {
  const int i = tensor_of_block(table);
  const int64_t begin = (static_cast<int64_t>(blockIdx.x) - table.first_chunk[i]) * kChunk;
  return {i, begin, std::min(table.numel[i], begin + kChunk)};
}

// The pointers of parameter i's lists.
template <typename T, int kLists, int kCapacity>
struct ListPointers {
  T* ptrs[kLists];
  __device__ ListPointers(const TensorTable<T, kLists, kCapacity>& table, int i) {
#pragma unroll
    for (int k = 0; k < kLists; ++k) ptrs[k] = table.data[k][i];
  }
};

// Where a kernel reads one hyperparameter: a float32 or float64 scalar on the device (at most one of
// the two pointers set), or the options' value when neither is.
struct ScalarSource {
  const float* f32;
  const double* f64;
  __device__ double read(double option) const {
    if (f64 != nullptr) return *f64;
    if (f32 != nullptr) return static_cast<double>(*f32);
    return option;
  }
};

// Adam's rule over {param, grad, exp_avg, exp_avg_sq} at step t (bias corrections folded in).
template <typename C>
struct AdamRule {
  static constexpr int kWritten = 0b1101;
  C lr, beta1, beta2, eps, wd, bias1, bias2_sqrt;
  bool decoupled;
  __device__ void operator()(C (&x)[4]) const {
    C& param = x[0];
    C grad = x[1];
    if (decoupled) param *= C(1) - lr * wd;
    else grad += wd * param;
    x[2] = beta1 * x[2] + (C(1) - beta1) * grad;
    x[3] = beta2 * x[3] + (C(1) - beta2) * grad * grad;
    param = param - lr / bias1 * x[2] / (sqrt(x[3]) / bias2_sqrt + eps);
  }
};

// Where Adam's kernel reads its hyperparameters.
struct AdamSources {
  ScalarSource lr, beta1, beta2, eps, weight_decay;
};

template <typename T, int kCapacity>
__global__ void adam_kernel(TensorTable<T, 4, kCapacity> table, AdamStepOptions o, const float* skip,
                            AdamSources src) {
  if (skip != nullptr && *skip != 0.f) return;
  using C = acc_type<T>;
  const Chunk chunk = chunk_of_block(table);
  const double t = static_cast<double>(*table.steps[chunk.tensor]) + 1.0;
  // The bias corrections use the betas of this step, as PyTorch's do.
  const double beta1 = src.beta1.read(o.beta1), beta2 = src.beta2.read(o.beta2);
  const AdamRule<C> rule{static_cast<C>(src.lr.read(o.lr)), static_cast<C>(beta1), static_cast<C>(beta2),
                         static_cast<C>(src.eps.read(o.eps)), static_cast<C>(src.weight_decay.read(o.weight_decay)),
                         static_cast<C>(1.0 - pow(beta1, t)), static_cast<C>(sqrt(1.0 - pow(beta2, t))),
                         o.decoupled};
  update_range(ListPointers<T, 4, kCapacity>(table, chunk.tensor).ptrs, chunk.begin, chunk.end, rule);
}

template <typename T, int kLists, int kCapacity>
__global__ void advance_steps_kernel(TensorTable<T, kLists, kCapacity> table, const float* skip) {
  if (skip != nullptr && *skip != 0.f) return;
  for (int i = static_cast<int>(threadIdx.x); i < table.count; i += static_cast<int>(blockDim.x))
    *table.steps[i] += 1.f;
}

// PyTorch's SGD rule over {param, grad} or, with momentum, {param, grad, momentum_buffer}.
template <typename C, int kLists>
struct SgdRule {
  static constexpr int kWritten = kLists == 3 ? 0b101 : 0b1;
  C lr, momentum, wd, keep;
  bool nesterov;
  __device__ void operator()(C (&x)[kLists]) const {
    C d = x[1] + wd * x[0];
    if constexpr (kLists == 3) {
      x[2] = momentum * x[2] + keep * d;
      d = nesterov ? d + momentum * x[2] : x[2];
    }
    x[0] -= lr * d;
  }
};

// Where SGD's kernel reads its hyperparameters.
struct SgdSources {
  ScalarSource lr, momentum, dampening, weight_decay;
};

template <typename T, int kLists, int kCapacity>
__global__ void sgd_kernel(TensorTable<T, kLists, kCapacity> table, SgdStepOptions o, const float* skip,
                           SgdSources src) {
  if (skip != nullptr && *skip != 0.f) return;
  using C = acc_type<T>;
  const Chunk chunk = chunk_of_block(table);
  const SgdRule<C, kLists> rule{static_cast<C>(src.lr.read(o.lr)), static_cast<C>(src.momentum.read(o.momentum)),
                                static_cast<C>(src.weight_decay.read(o.weight_decay)),
                                static_cast<C>(1.0 - src.dampening.read(o.dampening)), o.nesterov};
  update_range(ListPointers<T, kLists, kCapacity>(table, chunk.tensor).ptrs, chunk.begin, chunk.end, rule);
}

// Fills tables of up to kCapacity parameters from lists[k][first..] (and steps, when not empty) and
// hands each to launch(table, grid_size); returns the index after the last parameter taken.
template <typename T, int kLists, int kCapacity, typename Launch>
size_t launch_table(const TensorList* const (&lists)[kLists], const TensorList& steps, size_t first,
                    const Launch& launch) {
  TensorTable<T, kLists, kCapacity> table{};
  int64_t chunks = 0;
  size_t i = first;
  const size_t n = lists[0]->size();
  for (; i < n && table.count < kCapacity; ++i) {
    const int64_t numel = (*lists[0])[i].numel();
    const int64_t own = (numel + kChunk - 1) / kChunk;
    if (chunks + own > INT32_MAX && table.count > 0) break;  // the grid's size is an int
    TG_CHECK(own <= INT32_MAX, "[optimizer step] parameter ", i, " has ", numel, " elements, more than one launch takes");
    const int k = table.count++;
    for (int l = 0; l < kLists; ++l) table.data[l][k] = (*lists[l])[i].template data_ptr<T>();
    table.steps[k] = steps.empty() ? nullptr : steps[i].data_ptr<float>();
    table.numel[k] = numel;
    table.first_chunk[k] = static_cast<int>(chunks);
    chunks += own;
  }
  table.first_chunk[table.count] = static_cast<int>(chunks);
  launch(table, static_cast<unsigned>(chunks));
  return i;
}

// Hands every parameter to `launch` in tables: one table for lists of up to kLargeTable parameters,
// the small one for lists of up to kSmallTable.
template <typename T, int kLists, typename Launch>
void launch_all(const TensorList* const (&lists)[kLists], const TensorList& steps, const Launch& launch) {
  const size_t n = lists[0]->size();
  for (size_t first = 0; first < n;) {
    first = n - first <= kSmallTable ? launch_table<T, kLists, kSmallTable>(lists, steps, first, launch)
                                     : launch_table<T, kLists, kLargeTable>(lists, steps, first, launch);
  }
}

template <typename T>
void launch_adam(const TensorList* const (&lists)[4], const TensorList& steps, const AdamStepOptions& o,
                 const float* skip, AdamSources src) {
  cudaStream_t stream = current_stream();
  launch_all<T, 4>(lists, steps, [&](const auto& table, unsigned grid) {
    constexpr int kCapacity = std::decay_t<decltype(table)>::kSize;
    if (grid > 0) {
      adam_kernel<T, kCapacity><<<grid, kThreads, 0, stream>>>(table, o, skip, src);
      TG_CUDA_CHECK_LAUNCH();
    }
    advance_steps_kernel<T, 4, kCapacity><<<1, kThreads, 0, stream>>>(table, skip);
    TG_CUDA_CHECK_LAUNCH();
  });
}

template <typename T, int kLists>
void launch_sgd(const TensorList* const (&lists)[kLists], const SgdStepOptions& o, const float* skip,
                SgdSources src) {
  cudaStream_t stream = current_stream();
  launch_all<T, kLists>(lists, TensorList{}, [&](const auto& table, unsigned grid) {
    constexpr int kCapacity = std::decay_t<decltype(table)>::kSize;
    if (grid == 0) return;
    sgd_kernel<T, kLists, kCapacity><<<grid, kThreads, 0, stream>>>(table, o, skip, src);
    TG_CUDA_CHECK_LAUNCH();
  });
}

const float* skip_pointer(const Tensor& skip_if) { return skip_if.defined() ? skip_if.data_ptr<float>() : nullptr; }

ScalarSource scalar_source(const Tensor& t) {
  if (!t.defined()) return {nullptr, nullptr};
  if (t.dtype() == kFloat64) return {nullptr, t.data_ptr<double>()};
  return {t.data_ptr<float>(), nullptr};
}

}  // namespace

void sgd_step(const TensorList& params, const TensorList& grads, const TensorList& momentum_buffers,
              const SgdStepOptions& options, const Tensor& skip_if, const SgdStepScalars& scalars) {
  DeviceGuard device(params[0].device().index);
  const float* skip = skip_pointer(skip_if);
  const SgdSources src{scalar_source(scalars.lr), scalar_source(scalars.momentum), scalar_source(scalars.dampening),
                       scalar_source(scalars.weight_decay)};
  TG_DISPATCH_FLOATING(params[0].dtype(), "sgd_step_", [&] {
    if (momentum_buffers.empty()) {
      launch_sgd<scalar_t, 2>({&params, &grads}, options, skip, src);
    } else {
      launch_sgd<scalar_t, 3>({&params, &grads, &momentum_buffers}, options, skip, src);
    }
  });
}

void adam_step(const TensorList& params, const TensorList& grads, const TensorList& exp_avgs,
               const TensorList& exp_avg_sqs, const TensorList& steps, const AdamStepOptions& options,
               const Tensor& skip_if, const AdamStepScalars& scalars) {
  DeviceGuard device(params[0].device().index);
  const float* skip = skip_pointer(skip_if);
  const AdamSources src{scalar_source(scalars.lr), scalar_source(scalars.beta1), scalar_source(scalars.beta2),
                        scalar_source(scalars.eps), scalar_source(scalars.weight_decay)};
  TG_DISPATCH_FLOATING(params[0].dtype(), "adam_step_", [&] {
    launch_adam<scalar_t>({&params, &grads, &exp_avgs, &exp_avg_sqs}, steps, options, skip, src);
  });
}

}  // namespace tg::cuda
