// index_select (gather) and index_add (atomic scatter-add) kernels along one dim, strided inputs.
#include "ops/index/cuda/index.h"

#include <type_traits>

#include "ops/core/cuda/atomic.cuh"
#include "ops/factory/factory.h"
#include "tensor/cuda/cuda_check.h"
#include "tensor/cuda/device_error.h"

namespace tg::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxDims = 16;

// Sizes of the iterated tensor and the strides of the two tensors it maps between, passed by value.
struct Geometry {
  int ndim;
  int dim;              // the indexed dim
  int64_t dim_size;     // valid indices are [0, dim_size)
  int64_t sizes[kMaxDims];
  int64_t a_strides[kMaxDims];  // strides of the tensor read/written with the index at `dim`
  int64_t b_strides[kMaxDims];  // strides of the tensor walked with the plain coordinate
};

Geometry make_geometry(const char* op, const Tensor& walked, const Tensor& indexed, int64_t dim) {
  TG_CHECK(walked.dim() <= kMaxDims, "[", op, "] tensors with more than ", kMaxDims,
           " dims are not supported on CUDA, got ", walked.dim());
  Geometry g{};
  if (walked.dim() == 0) {  // a 0-dim tensor behaves as one element along dim 0
    g.ndim = 1;
    g.sizes[0] = 1;
    g.dim_size = 1;
    return g;
  }
  g.ndim = static_cast<int>(walked.dim());
  g.dim = static_cast<int>(dim);
  g.dim_size = indexed.size(dim);
  for (int i = 0; i < g.ndim; ++i) {
    g.sizes[i] = walked.sizes()[static_cast<size_t>(i)];
    g.b_strides[i] = walked.strides()[static_cast<size_t>(i)];
    g.a_strides[i] = indexed.strides()[static_cast<size_t>(i)];
  }
  return g;
}

// Offsets into the walked tensor (b) and the indexed tensor (a) for linear position i; false (after
// reporting the index to the device error record) when the index read at `dim` is out of range.
template <typename I>
__device__ bool locate(const Geometry& g, int64_t i, const I* index, int64_t index_stride, int64_t& a_off,
                       int64_t& b_off, DeviceErrorRecord* error, DeviceErrorOp op) {
  a_off = 0;
  b_off = 0;
  bool ok = true;
  for (int d = g.ndim - 1; d >= 0; --d) {
    const int64_t c = i % g.sizes[d];
    i /= g.sizes[d];
    b_off += c * g.b_strides[d];
    if (d == g.dim) {
      const int64_t k = static_cast<int64_t>(index[c * index_stride]);
      if (k < 0 || k >= g.dim_size) {
        report_device_error(error, op, k, g.dim_size, g.dim, 0);
        ok = false;  // b_off still completes: index_select zeroes that output element
      } else {
        a_off += k * g.a_strides[d];
      }
    } else {
      a_off += c * g.a_strides[d];
    }
  }
  return ok;
}

// walked = out (contiguous), indexed = x.
template <typename T, typename I>
__global__ void index_select_kernel(Geometry g, int64_t n, const T* x, const I* index, int64_t index_stride, T* out,
                                    DeviceErrorRecord* error) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  int64_t x_off, out_off;
  if (!locate(g, i, index, index_stride, x_off, out_off, error, DeviceErrorOp::IndexSelect)) {
    out[out_off] = T(0);
    return;
  }
  out[out_off] = x[x_off];
}


// walked = source, indexed = out (contiguous).
template <typename T, typename I>
__global__ void index_add_kernel(Geometry g, int64_t n, const T* source, const I* index, int64_t index_stride, T* out,
                                 DeviceErrorRecord* error) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  int64_t out_off, src_off;
  if (!locate(g, i, index, index_stride, out_off, src_off, error, DeviceErrorOp::IndexAdd)) return;
  atomic_add(out + out_off, source[src_off]);
}

int64_t index_stride_of(const Tensor& index) { return index.dim() == 0 ? 0 : index.strides()[0]; }

}  // namespace

void index_select(const Tensor& x, int64_t dim, const Tensor& index, Tensor& out) {
  const int64_t n = out.numel();
  if (n == 0) return;
  const Geometry g = make_geometry("index_select", out, x, dim);
  DeviceErrorRecord* error = device_error_record(x.device().index);
  TG_DISPATCH_ALL(x.dtype(), "index_select", [&] {
    using T = scalar_t;
    const unsigned blocks = blocks_for(n, kThreads);
    if (index.dtype() == kInt64) {
      index_select_kernel<T, int64_t><<<blocks, kThreads, 0, current_stream()>>>(
          g, n, static_cast<const T*>(x.raw_data()), index.data_ptr<int64_t>(), index_stride_of(index),
          static_cast<T*>(out.raw_data()), error);
    } else {
      index_select_kernel<T, int32_t><<<blocks, kThreads, 0, current_stream()>>>(
          g, n, static_cast<const T*>(x.raw_data()), index.data_ptr<int32_t>(), index_stride_of(index),
          static_cast<T*>(out.raw_data()), error);
    }
    TG_CUDA_CHECK_LAUNCH();
  });
}

void index_add(Tensor& out, int64_t dim, const Tensor& index, const Tensor& source) {
  const int64_t n = source.numel();
  if (n == 0) return;
  const Geometry g = make_geometry("index_add", source, out, dim);
  DeviceErrorRecord* error = device_error_record(out.device().index);
  TG_DISPATCH_NUMERIC(out.dtype(), "index_add", [&] {
    using T = scalar_t;
    const unsigned blocks = blocks_for(n, kThreads);
    if (index.dtype() == kInt64) {
      index_add_kernel<T, int64_t><<<blocks, kThreads, 0, current_stream()>>>(
          g, n, static_cast<const T*>(source.raw_data()), index.data_ptr<int64_t>(), index_stride_of(index),
          static_cast<T*>(out.raw_data()), error);
    } else {
      index_add_kernel<T, int32_t><<<blocks, kThreads, 0, current_stream()>>>(
          g, n, static_cast<const T*>(source.raw_data()), index.data_ptr<int32_t>(), index_stride_of(index),
          static_cast<T*>(out.raw_data()), error);
    }
    TG_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace tg::cuda
