// Kernels and checks shared by the matrix-product ops (mm, bmm, addmm, linear and the fused linear
// epilogues): operand validation, bias fills, one product on the tensors' device, and the layouts
// their gradients take.
#pragma once

#include <cstdint>

#include "ops/linalg/gemm.h"
#include "tensor/tensor.h"
#include "tensor/tensor_meta.h"

namespace tg {

// Errors unless t is a `dims`-D floating tensor ("[op] expected <what> to be a 2-D tensor ...").
void check_float_matrix(const char* op, const char* what, const Tensor& t, int64_t dims);
// Errors unless a and b share a dtype.
void check_same_dtype(const char* op, const char* wa, const Tensor& a, const char* wb, const Tensor& b);
// Errors unless the bias sits on `device` exactly (a CPU scalar cannot feed a CUDA kernel).
void check_bias_device(const char* op, const Tensor& bias, Device device);
// Validates mat1 [n, k] @ mat2 [k, m]; returns the common device.
Device check_mm(const char* op, const Tensor& a, const Tensor& b);

// Writes beta * bias (zeros without one) into the contiguous [n, m] `out` on out's device.
void fill_bias(const Tensor& out, int64_t n, int64_t m, const BiasRef& bias, double beta);
// Runs g on its device's BLAS (cuBLAS, or the CPU products of ops/linalg/cpu/gemm.cpp).
void run_gemm(const Gemm& g);
// The product out (contiguous [n, m]) = alpha * op(a) @ op(b), operands read in place where their
// strides allow (else copied into keep_a / keep_b), beta 0.
Gemm gemm_2d_plan(const Tensor& out, int64_t n, int64_t m, int64_t k, const Tensor& a, bool trans_a, const Tensor& b,
                  bool trans_b, double alpha, Tensor& keep_a, Tensor& keep_b);
// out (contiguous [n, m]) = alpha * op(a) @ op(b) + beta * bias, op() transposing when asked, then
// clamped at 0 with `relu`. On CUDA a [m] bias and the ReLU ride in cuBLASLt's epilogue; otherwise
// the bias is written first and the product accumulates into it: a single BLAS call either way.
void gemm_2d(const Tensor& out, int64_t n, int64_t m, int64_t k, const Tensor& a, bool trans_a, const Tensor& b,
             bool trans_b, double alpha, const BiasRef* bias, double beta, bool relu = false);

// True when a 2-D tensor is stored column-major (the transpose of a row-major matrix).
bool column_major(const TensorMeta& m);
// d(a @ b)/da given the output gradient g, laid out like a (a transposed operand gets a transposed,
// hence contiguous after its view's backward, gradient).
Tensor mat1_grad(const Tensor& g, const Tensor& b, const TensorMeta& a_meta);
// d(a @ b)/db given the output gradient g, laid out like b (see mat1_grad).
Tensor mat2_grad(const Tensor& g, const Tensor& a, const TensorMeta& b_meta);

}  // namespace tg
