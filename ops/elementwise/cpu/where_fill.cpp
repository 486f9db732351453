// CPU kernels of fills and where().
#include "ops/elementwise/cpu/elementwise.h"
#include "ops/elementwise/cpu/loops.h"
#include "ops/elementwise/elementwise_select.h"

namespace tg::cpu {

void launch_where(DType compute, const TensorIter& it) { ew::visit_where(compute, Launch{it}); }

void launch_fill(const Scalar& value, const TensorIter& it) { ew::visit_fill(it.dtypes[0], value, Launch{it}); }

}  // namespace tg::cpu
