// multi_tensor_norm on CUDA. Tensors are grouped by dtype; for each group of up to kCapacity tensors,
// one launch has every block reduce one chunk of one tensor (found by a binary search of the
// tensors' first chunks in a table passed by value, so a captured launch needs no device-side
// table) into a partial, and a second launch reduces each tensor's partials, in chunk order, to its
// norm. No atomics: the result is the same on every run.
#include "ops/reduce/cuda/multi_tensor_norm.h"

#include <cub/block/block_reduce.cuh>

#include <cmath>
#include <map>
#include <vector>

#include "ops/core/cuda/tensor_table.cuh"
#include "ops/factory/factory.h"
#include "tensor/check.h"
#include "tensor/cuda/cuda_check.h"
#include "tensor/cuda/device_guard.h"
#include "tensor/half.h"

namespace tg::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kChunk = 16384;  // elements one block reduces
constexpr int kCapacity = 256;     // tensors one launch takes

// One launch's tensors: data, sizes, where each norm goes in the output, and each one's first chunk
// (first_chunk[count] is the grid size).
template <typename T>
struct NormTable {
  const T* data[kCapacity];
  int64_t numel[kCapacity];
  int out_index[kCapacity];
  int first_chunk[kCapacity + 1];
  int count;
};

// |x| accumulated by the order: a sum for 1, a sum of squares for 2, a maximum for inf (NaN wins).
template <typename C>
__device__ C combine(C a, C b, int ord) {
  if (ord == 0) return (a != a || b != b) ? a + b : (a > b ? a : b);  // inf
  return a + b;
}

template <typename C>
__device__ C lift(C v, int ord) {
  v = v < C(0) ? -v : v;
  return ord == 2 ? v * v : v;
}

// The sum (or maximum) of a block's values, in thread 0.
template <typename C>
__device__ C block_combine(C v, int ord) {
  using Reduce = cub::BlockReduce<C, kThreads>;
  __shared__ typename Reduce::TempStorage temp;
  return Reduce(temp).Reduce(v, [ord](C a, C b) { return combine(a, b, ord); });
}

template <typename T, typename C>
__global__ void partial_kernel(const NormTable<T> table, int ord, C* partials) {
  const int block = static_cast<int>(blockIdx.x);
  const int lo = tensor_of_block(table.first_chunk, table.count, block);
  const int64_t begin = static_cast<int64_t>(block - table.first_chunk[lo]) * kChunk;
  const int64_t end = begin + kChunk < table.numel[lo] ? begin + kChunk : table.numel[lo];
  const T* x = table.data[lo];
  C acc = 0;
  for (int64_t j = begin + threadIdx.x; j < end; j += kThreads) acc = combine(acc, lift(static_cast<C>(x[j]), ord), ord);
  const C total = block_combine(acc, ord);
  if (threadIdx.x == 0) partials[block] = total;
}

template <typename T, typename C, typename Out>
__global__ void finish_kernel(const NormTable<T> table, int ord, const C* partials, Out* out) {
  const int i = static_cast<int>(blockIdx.x);
  C acc = 0;
  for (int c = table.first_chunk[i] + static_cast<int>(threadIdx.x); c < table.first_chunk[i + 1]; c += kThreads)
    acc = combine(acc, partials[c], ord);
  const C total = block_combine(acc, ord);
  if (threadIdx.x == 0) out[table.out_index[i]] = static_cast<Out>(ord == 2 ? sqrt(total) : total);
}

// Launches the two kernels for tensors `which` of `tensors` (all of dtype T), in tables.
template <typename T, typename Out>
void launch_group(const TensorList& tensors, const std::vector<int>& which, int ord, Out* out, Device device) {
  using C = acc_type<T>;
  cudaStream_t stream = current_stream();
  for (size_t first = 0; first < which.size();) {
    NormTable<T> table{};
    int64_t chunks = 0;
    size_t k = first;
    for (; k < which.size() && table.count < kCapacity; ++k) {
      const Tensor& t = tensors[static_cast<size_t>(which[k])];
      const int64_t own = (t.numel() + kChunk - 1) / kChunk;
      if (chunks + own > INT32_MAX && table.count > 0) break;  // the grid's size is an int
      TG_CHECK(own <= INT32_MAX, "[multi_tensor_norm] tensor ", which[k], " has ", t.numel(),
               " elements, more than one launch takes");
      const int e = table.count++;
      table.data[e] = t.data_ptr<T>();
      table.numel[e] = t.numel();
      table.out_index[e] = which[k];
      table.first_chunk[e] = static_cast<int>(chunks);
      chunks += own;
    }
    table.first_chunk[table.count] = static_cast<int>(chunks);
    const Tensor partials = empty({std::max<int64_t>(chunks, 1)},
                                  {.dtype = std::is_same_v<C, double> ? kFloat64 : kFloat32, .device = device});
    if (chunks > 0) {
      partial_kernel<T, C><<<static_cast<unsigned>(chunks), kThreads, 0, stream>>>(table, ord, partials.data_ptr<C>());
      TG_CUDA_CHECK_LAUNCH();
    }
    finish_kernel<T, C, Out><<<static_cast<unsigned>(table.count), kThreads, 0, stream>>>(table, ord,
                                                                                      partials.data_ptr<C>(), out);
    TG_CUDA_CHECK_LAUNCH();
    first = k;
  }
}

}  // namespace

void multi_tensor_norm(const TensorList& tensors, double ord, const Tensor& out) {
  DeviceGuard guard(out.device().index);
  const int code = ord == 1.0 ? 1 : ord == 2.0 ? 2 : 0;  // 0: inf
  std::map<DType, std::vector<int>> groups;
  for (size_t i = 0; i < tensors.size(); ++i) groups[tensors[i].dtype()].push_back(static_cast<int>(i));
  for (const auto& [dtype, which] : groups) {
    TG_DISPATCH_FLOATING(dtype, "multi_tensor_norm", [&] {
      using T = scalar_t;
      if (out.dtype() == kFloat64) {
        launch_group<T, double>(tensors, which, code, out.data_ptr<double>(), out.device());
      } else {
        launch_group<T, float>(tensors, which, code, out.data_ptr<float>(), out.device());
      }
    });
  }
}

}  // namespace tg::cuda
