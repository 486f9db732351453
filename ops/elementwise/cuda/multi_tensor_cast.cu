// multi_tensor_cast on CUDA: the casts of many tensors in one launch. Every block converts one
// chunk of one tensor, found by a binary search of the tensors' first blocks in a table passed by
// value (so a captured launch needs no device-side table), four elements per access.
#include "ops/elementwise/cuda/multi_tensor_cast.h"

#include <cstdint>

#include "ops/core/cuda/aligned_vector.cuh"
#include "ops/core/cuda/tensor_table.cuh"
#include "tensor/cuda/cuda_check.h"
#include "tensor/cuda/device_guard.h"
#include "tensor/half.h"

namespace tg::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kVec = 4;
constexpr int64_t kChunk = int64_t{kThreads} * kVec * 16;  // elements one block converts
constexpr int kCapacity = 96;                               // tensors one launch takes (4 KiB of parameters)

template <typename To, typename From>
struct CastTable {
  const From* src[kCapacity];
  To* dst[kCapacity];
  int64_t numel[kCapacity];
  int first_block[kCapacity + 1];
  int count;
};

template <typename To, typename From>
__global__ void __launch_bounds__(kThreads) cast_kernel(const CastTable<To, From> table) {
  const int block = static_cast<int>(blockIdx.x);
  const int lo = tensor_of_block(table.first_block, table.count, block);
  const int64_t begin = static_cast<int64_t>(block - table.first_block[lo]) * kChunk;
  const int64_t n = table.numel[lo];
  const int64_t end = begin + kChunk < n ? begin + kChunk : n;
  const From* src = table.src[lo];
  To* dst = table.dst[lo];
  // The chunk's whole vectors (numel is a multiple of kVec), then nothing is left over.
  for (int64_t i = begin + int64_t{threadIdx.x} * kVec; i < end; i += int64_t{kThreads} * kVec) {
    const AlignedVector<From, kVec> a = *reinterpret_cast<const AlignedVector<From, kVec>*>(src + i);
    AlignedVector<To, kVec> b;
#pragma unroll
    for (int k = 0; k < kVec; ++k) b.v[k] = static_cast<To>(a.v[k]);  // as ConvertFn (copy_) rounds
    *reinterpret_cast<AlignedVector<To, kVec>*>(dst + i) = b;
  }
}

// Launches the casts of pairs `which` (all From -> To) in tables of up to kCapacity tensors.
template <typename To, typename From>
void launch_casts(const TensorList& in, const TensorList& out, const std::vector<size_t>& which) {
  for (size_t start = 0; start < which.size(); start += kCapacity) {
    CastTable<To, From> table{};
    int blocks = 0;
    for (size_t k = start; k < which.size() && k < start + kCapacity; ++k) {
      const size_t i = which[k];
      table.src[table.count] = static_cast<const From*>(in[i].raw_data());
      table.dst[table.count] = static_cast<To*>(out[i].raw_data());
      table.numel[table.count] = in[i].numel();
      table.first_block[table.count] = blocks;
      blocks += static_cast<int>((in[i].numel() + kChunk - 1) / kChunk);
      ++table.count;
    }
    table.first_block[table.count] = blocks;
    if (blocks == 0) continue;
    cast_kernel<To, From><<<static_cast<unsigned>(blocks), kThreads, 0, current_stream()>>>(table);
    TG_CUDA_CHECK_LAUNCH();
  }
}

}  // namespace

std::vector<bool> multi_tensor_cast(const TensorList& in, const TensorList& out) {
  std::vector<bool> done(in.size(), false);
  // The pairs one kernel takes, by (source, target) dtype: float32 -> bf16 / f16, and back.
  std::vector<size_t> to_bf16, to_f16, from_bf16, from_f16;
  for (size_t i = 0; i < in.size(); ++i) {
    const Tensor& x = in[i];
    const Tensor& y = out[i];
    if (!x.device().is_cuda() || y.device() != x.device() || !x.is_contiguous() || !y.is_contiguous()) continue;
    if (x.numel() == 0 || x.numel() % kVec != 0 || !aligned_16(x.raw_data()) || !aligned_16(y.raw_data())) continue;
    std::vector<size_t>* group = nullptr;
    if (x.dtype() == kFloat32 && y.dtype() == kBFloat16) group = &to_bf16;
    if (x.dtype() == kFloat32 && y.dtype() == kFloat16) group = &to_f16;
    if (x.dtype() == kBFloat16 && y.dtype() == kFloat32) group = &from_bf16;
    if (x.dtype() == kFloat16 && y.dtype() == kFloat32) group = &from_f16;
    if (group == nullptr || x.device() != in[0].device()) continue;
    group->push_back(i);
    done[i] = true;
  }
  if (in.empty() || !in[0].device().is_cuda()) return done;
  DeviceGuard guard(in[0].device().index);
  launch_casts<BFloat16, float>(in, out, to_bf16);
  launch_casts<Half, float>(in, out, to_f16);
  launch_casts<float, BFloat16>(in, out, from_bf16);
  launch_casts<float, Half>(in, out, from_f16);
  return done;
}

}  // namespace tg::cuda
