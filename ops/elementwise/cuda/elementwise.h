// CUDA launchers of the elementwise op families. Each family's kernels are instantiated in the
// files of its units (ops/elementwise/kernel_units.h; a file may hold two): binary_*.cu, unary_*.cu
// and compare.cu beside this header; conversions, fills and where() in copy.cu. Every operand of the TensorIter
// must live on the output's CUDA device; ops turn CPU scalar operands into bound host values
// (EwParams::side) or stage them before calling these.
#pragma once

#include "ops/elementwise/elementwise.h"
#include "ops/elementwise/kernel_units.h"

namespace tg::cuda {

// The kernels of one unit's kinds; defined in that unit's file.
template <BinaryUnit U>
void launch_binary_unit(BinaryKind kind, DType compute, const EwParams& p, const TensorIter& it);
template <UnaryUnit U>
void launch_unary_unit(UnaryKind kind, DType compute, const EwParams& p, const TensorIter& it);
template <CompareUnit U>
void launch_compare_unit(CompareKind kind, DType compute, const EwParams& p, const TensorIter& it);

// Binary arithmetic and fused gradients at compute dtype `compute`.
inline void launch_binary(BinaryKind kind, DType compute, const EwParams& p, const TensorIter& it) {
  for_unit(kind, [&](auto unit) { launch_binary_unit<decltype(unit)::value>(kind, compute, p, it); });
}
// Unary functions at compute dtype `compute`.
inline void launch_unary(UnaryKind kind, DType compute, const EwParams& p, const TensorIter& it) {
  for_unit(kind, [&](auto unit) { launch_unary_unit<decltype(unit)::value>(kind, compute, p, it); });
}
// Comparisons of operands promoted to `compute`; the output is bool.
inline void launch_compare(CompareKind kind, DType compute, const EwParams& p, const TensorIter& it) {
  for_unit(kind, [&](auto unit) { launch_compare_unit<decltype(unit)::value>(kind, compute, p, it); });
}
// where(cond, a, b) with a and b promoted to `compute`.
void launch_where(DType compute, const TensorIter& it);
// Strided copy converting operand 1's dtype into operand 0's.
void launch_copy(const TensorIter& it);
// Writes `value` (converted to operand 0's dtype) everywhere.
void launch_fill(const Scalar& value, const TensorIter& it);

}  // namespace tg::cuda

// Defines the launcher of unit `Unit` of `family` (binary, unary or compare) on the output's
// device: the one line of each unit's file.
#define TG_CUDA_ELEMENTWISE_UNIT(family, Kind, Unit)                                                       \
  namespace tg::cuda {                                                                                 \
  template <>                                                                                          \
  void launch_##family##_unit<Unit>(Kind kind, DType compute, const EwParams& p, const TensorIter& it) { \
    DeviceGuard guard(it.device.index);                                                                \
    ew::visit_##family<ew::KindsOf<Unit>>(kind, compute, p, Launch{it});                               \
  }                                                                                                    \
  }
