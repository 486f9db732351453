// linear (x @ weight^T + bias) and the fused forms compiled graphs substitute for linear followed by
// an activation: the activation then runs in the product's epilogue on CUDA (cuBLASLt), and the
// variants with an auxiliary output keep what the activation's gradient reads.
#pragma once

#include <cstdint>
#include <optional>
#include <utility>

#include "ops/core/op.h"
#include "tensor/tensor.h"

namespace tg {

// x @ weight^T + bias, for x of any leading dims; weight is [out, in].
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());
// relu(linear(x, weight, bias)) as one op (on CUDA the ReLU is in the matmul's epilogue); compiled
// graphs fuse linear followed by relu into it.
Tensor linear_relu(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());
// relu(linear(...)) and its mask: one bit per element, set where the result is positive, in rows of
// relu_mask_row_bits(out) bits stored as int32 words (cuBLASLt's ReLU auxiliary layout, which its
// ReLU-gradient epilogue reads back).
std::pair<Tensor, Tensor> linear_relu_mask(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());
// gelu(linear(...), "tanh") and the pre-activation linear(...) (which gelu's gradient reads), from
// one product on CUDA (cuBLASLt computes the GELU in its epilogue).
std::pair<Tensor, Tensor> linear_gelu_tanh(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());

// Bits per row of a ReLU mask over `cols` columns: rounded up to 128, as cuBLASLt requires.
int64_t relu_mask_row_bits(int64_t cols);
// The ReLU mask of y (any shape, its last dim the columns): [rows, relu_mask_row_bits(cols) / 32] int32.
Tensor relu_mask_of(const Tensor& y);

// The activation a linear op applies to its product.
enum class LinearActivation : uint8_t { None, Relu, ReluMask, GeluTanh };
// The activation of a linear op (any of the forms above), or nullopt for other ops.
std::optional<LinearActivation> linear_activation(const Op& op);
// The same linear op (same bias arity) with another activation; null when `linear` is no linear op.
OpPtr linear_op_with(const Op& linear, LinearActivation activation);
// The fused linear_relu op for a `linear` op (same bias arity); null when `linear` is not one.
OpPtr fused_linear_relu_op(const Op& linear);

}  // namespace tg
