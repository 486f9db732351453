// CPU kernels of converting copies into bool and the integer dtypes.
#include "ops/elementwise/cpu/elementwise.h"
#include "ops/elementwise/cpu/loops.h"
#include "ops/elementwise/elementwise_select.h"

namespace tg::cpu {

void launch_copy_into_exact(const TensorIter& it) { ew::visit_convert<false>(it.dtypes[0], it.dtypes[1], Launch{it}); }

}  // namespace tg::cpu
