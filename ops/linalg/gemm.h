// One description of a (batched) matrix product shared by the Eigen and cuBLAS back ends, and the
// stride analysis that lets transposed and sliced operands reach BLAS without a copy.
#pragma once

#include <cstdint>
#include <optional>

#include "tensor/device.h"
#include "tensor/dtype.h"
#include "tensor/tensor.h"

namespace tg {

// A matrix inside a tensor's memory: element (i, j) lives at data + i*row_stride + j*col_stride
// (strides in elements).
struct MatRef {
  const void* data = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t row_stride = 0;
  int64_t col_stride = 0;
};

// How BLAS reads one operand: row-major with leading dimension `ld`, or (trans) column-major,
// i.e. the transpose of a row-major matrix; batch_stride steps between matrices of a batch.
struct GemmOperand {
  const void* data = nullptr;
  bool trans = false;
  int64_t ld = 1;
  int64_t batch_stride = 0;
};

// out[b] = alpha * a[b] @ b[b] + beta * out[b] for b < batch, all row-major in the caller's view:
// a is [n, k], b is [k, m], out is [n, m] with leading dimension ldc. beta is 0 or 1 here (a bias
// is written into `out` beforehand), so out need not be initialized when beta is 0.
struct Gemm {
  DType dtype = kFloat32;
  Device device;
  int64_t n = 0, m = 0, k = 0, batch = 1;
  GemmOperand a, b;
  void* out = nullptr;
  int64_t ldc = 0;
  int64_t out_batch_stride = 0;
  double alpha = 1.0;
  double beta = 0.0;
  // 16-bit operands writing a float32 `out` (with beta 1, accumulating into it in float32).
  bool float32_out = false;
};

// A bias broadcast over an [n, m] output: element (i, j) is bias[i*s0 + j*s1] (0 strides broadcast).
struct BiasRef {
  const void* data = nullptr;
  int64_t s0 = 0;
  int64_t s1 = 0;
};

// The BLAS reading of m when its strides allow one (row-major or column-major with a valid
// leading dimension); nullopt when only a copy can make it BLAS-compatible.
std::optional<GemmOperand> blas_layout(const MatRef& m);

// The matrix view [prod(leading dims), last dim] of t (a 1-D t is one row); nullopt when the
// leading dims cannot merge into one stride.
std::optional<MatRef> as_matrix(const Tensor& t);

// The transpose of a matrix view (swaps the roles of rows and columns, no data moves).
MatRef transposed(const MatRef& m);

// The BLAS operand for matrix t (or its transpose when `transpose`), keeping in `keep` a
// contiguous copy when t's strides are not BLAS-compatible.
GemmOperand gemm_operand(const Tensor& t, bool transpose, Tensor& keep);
// The same for each matrix of a 3-D tensor [batch, rows, cols]; sets batch_stride (0 when the
// batch is broadcast, so an expanded operand is read in place).
GemmOperand batched_gemm_operand(const Tensor& t, bool transpose, Tensor& keep);

// Runs g on the CPU with Eigen.
void cpu_gemm(const Gemm& g);
// Writes beta * bias into the contiguous [n, m] matrix `out` on the CPU.
void cpu_fill_bias(DType dtype, void* out, int64_t n, int64_t m, const BiasRef& bias, double beta);

}  // namespace tg
