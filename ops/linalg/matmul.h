// Matrix products (Eigen on the CPU, cuBLAS on CUDA; no hand-written GEMM).
#pragma once

#include <optional>

#include "ops/core/op.h"
#include "ops/linalg/linear.h"
#include "tensor/tensor.h"

namespace tg {

// [n,k] x [k,m] -> [n,m]
Tensor mm(const Tensor& a, const Tensor& b);
// mm with the result in out_dtype, as torch.mm(a, b, out_dtype=...): float16 or bfloat16 operands may
// give a float32 result, summed in float32 and never rounded to 16 bits (out_dtype equal to the
// operands' is plain mm).
Tensor mm(const Tensor& a, const Tensor& b, DType out_dtype);
// The op of mm(a, b, out_dtype), for graph rewrites.
OpPtr mm_op(DType out_dtype);
// [B,n,k] x [B,k,m] -> [B,n,m]
Tensor bmm(const Tensor& a, const Tensor& b);
// NumPy/PyTorch matmul: 1-D, 2-D and batched (broadcast batch dims) operands.
Tensor matmul(const Tensor& a, const Tensor& b);
// beta * bias + alpha * (a @ b), bias broadcast to [n,m].
Tensor addmm(const Tensor& bias, const Tensor& a, const Tensor& b, Scalar beta = 1, Scalar alpha = 1);
// On CUDA, single products pick cuBLASLt's algorithm per shape by timing its candidates on the first
// call (the default), or take cuBLAS's heuristic choice, the same in every process, when disabled
// (as PyTorch's cudnn.benchmark switch does for convolutions). No effect on the CPU.
void set_gemm_autotuning(bool enabled);

}  // namespace tg
