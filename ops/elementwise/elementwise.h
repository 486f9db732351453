// Shared machinery of elementwise ops: operand geometry for one launch (broadcast, reordered,
// coalesced), PyTorch's result-type rules, the checks their infer() rules share, and the op kinds
// that the CPU loops and the CUDA launchers both select functors by.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>

#include "ops/core/op.h"
#include "ops/elementwise/binary_kinds.h"
#include "ops/elementwise/compare_kinds.h"
#include "ops/elementwise/unary_kinds.h"

namespace tg {

// Operands of one launch (the output plus up to three inputs) and dims after coalescing;
// PyTorch allows 25 dims, and so do we.
inline constexpr int kMaxIterOperands = 4;
inline constexpr int kMaxIterDims = 25;

// Where the data of one elementwise launch lives. Operand 0 is the output; inputs are read as if
// expanded to its shape (stride 0 on broadcast dims). Dims are stored innermost first, size-1 dims
// are dropped, dims are ordered by the output's strides and merged where every operand allows, so
// a contiguous launch has exactly one dim. Lives on the stack: building one allocates nothing.
struct TensorIter {
  int ndim = 0;
  int nops = 0;
  int64_t numel = 0;
  int64_t sizes[kMaxIterDims];
  int64_t strides[kMaxIterOperands][kMaxIterDims];  // in bytes
  char* data[kMaxIterOperands];
  DType dtypes[kMaxIterOperands];
  Device device;  // the output's device; CUDA launches make it current

  // The iteration writing `out` from `inputs` (each broadcastable to out's sizes, on out's device).
  static TensorIter make(const Tensor& out, std::initializer_list<const Tensor*> inputs);
  // True when every operand is dense in the same order, so one flat loop covers the launch.
  bool is_contiguous() const;
  // True when operand k has the dtype of the C++ type the kernel reads or writes for it.
  bool operand_is(int k, DType d) const { return dtypes[k] == d; }
};

// ---- result types ----------------------------------------------------------------------------

// PyTorch's result_type over tensor operands: dimensioned tensors decide, and 0-dim tensors
// only lift the result to a higher category (float32 tensor + float64 0-dim tensor is float32).
DType result_type(std::initializer_list<const Tensor*> operands);
// The same rule over operand metadata (graph passes see no tensors).
DType result_type(const std::vector<TensorMeta>& operands);
// result_type of one tensor with a Python-style scalar operand.
DType result_type(const Tensor& t, const Scalar& s);
// PyTorch's short dtype names used in cast errors ("Float", "Long", "Bool").
const char* scalar_type_name(DType d);
// PyTorch's can_cast: no floating to integral, no non-bool to bool.
bool can_cast(DType from, DType to);
// A scalar as op attributes print it ("2", "0.5", "true").
std::string scalar_str(const Scalar& s);

// ---- shared infer() checks ------------------------------------------------------------------

// Metadata of the out-of-place result: broadcast sizes, `dtype`, the operands' common device.
// Strides are left empty so the dispatcher fills in contiguous ones without another pass.
TensorMeta elementwise_meta(const char* op, std::initializer_list<const Tensor*> operands, DType dtype);
// Checks of an in-place op writing `target` with a value of dtype `result` computed from
// `others`: same device, broadcast to target's shape, castable dtype, no partial overlap.
void check_inplace(const char* op, const Tensor& target, std::initializer_list<const Tensor*> others,
                   DType result);
// Errors when `a` and `b` share memory without being exactly the same elements.
void check_no_partial_overlap(const char* op, const Tensor& target, const Tensor& input);
// The value of a one-element CPU tensor as a Scalar (a CPU operand of a CUDA op).
Scalar scalar_of(const Tensor& t);
// True when a CUDA launch must read `t` as a host value instead of device memory.
inline bool is_host_scalar_operand(const Tensor& t, const Tensor& out) {
  return t.is_cpu() && !out.is_cpu() && t.dim() == 0;
}

// ---- backward helpers -----------------------------------------------------------------------

// The gradient for an input whose forward metadata is `m`: broadcast dims summed away and the
// input's dtype and device restored (a 0-dim CPU operand of a CUDA op gets a CPU gradient).
Tensor reduce_grad(const Tensor& g, const TensorMeta& m);
// Fused gradient kernels (one pass instead of three), each differentiable again.
// g * (1 - y^2) where y = tanh(x).
Tensor tanh_backward(const Tensor& g, const Tensor& y);
// g * y * (1 - y) where y = sigmoid(x).
Tensor sigmoid_backward(const Tensor& g, const Tensor& y);
// g where y > 0, else 0 (relu's gradient, with relu'(0) = 0).
Tensor threshold_backward(const Tensor& g, const Tensor& y);
// g * gelu'(x) for the exact ("none") or "tanh" approximation.
Tensor gelu_backward(const Tensor& g, const Tensor& x, bool tanh_approx);
// d^2/dx^2 gelu(x) (gelu_backward's gradient in x), written with tensor ops so that it is
// differentiable too.
Tensor gelu_second_derivative(const Tensor& x, bool tanh_approx);
// g * silu'(x) = g * s * (1 + x * (1 - s)) where s = sigmoid(x).
Tensor silu_backward(const Tensor& g, const Tensor& x);

// ---- op kinds shared by the CPU loops and CUDA launchers ------------------------------------
// UnaryKind, BinaryKind and CompareKind come from their lists (ops/*_kinds.h).

// Which operand of a binary functor is a host value rather than a tensor.
enum class ScalarSide : uint8_t { None, Right, Left };

// Parameters a functor may need besides its tensor operands.
struct EwParams {
  Scalar alpha = 1;                         // add/sub: a + alpha * b
  Scalar scalar;                            // the host operand when side != None
  ScalarSide side = ScalarSide::None;
  Scalar exponent;                          // pow
  std::optional<Scalar> lo, hi;             // clamp bounds
  Scalar beta = 1, threshold = 20;          // softplus
};

}  // namespace tg
