// CUDA launchers of the elementwise op families (defined in ops/cuda/{binary,unary,compare,copy}.cu).
// Every operand of the TensorIter must live on the output's CUDA device; ops turn CPU scalar
// operands into bound host values (EwParams::side) or stage them before calling these.
#pragma once

#include "ops/elementwise/elementwise.h"

namespace tg::cuda {

// Binary arithmetic and fused gradients at compute dtype `compute`.
void launch_binary(BinaryKind kind, DType compute, const EwParams& p, const TensorIter& it);
// Unary functions at compute dtype `compute`.
void launch_unary(UnaryKind kind, DType compute, const EwParams& p, const TensorIter& it);
// Comparisons of operands promoted to `compute`; the output is bool.
void launch_compare(CompareKind kind, DType compute, const EwParams& p, const TensorIter& it);
// where(cond, a, b) with a and b promoted to `compute`.
void launch_where(DType compute, const TensorIter& it);
// Strided copy converting operand 1's dtype into operand 0's.
void launch_copy(const TensorIter& it);
// Writes `value` (converted to operand 0's dtype) everywhere.
void launch_fill(const Scalar& value, const TensorIter& it);

}  // namespace tg::cuda
