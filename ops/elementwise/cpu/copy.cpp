// CPU kernels of converting copies into floating dtypes, and the copy launcher.
#include "ops/elementwise/cpu/elementwise.h"
#include "ops/elementwise/cpu/loops.h"
#include "ops/elementwise/elementwise_select.h"

namespace tg::cpu {

void launch_copy(const TensorIter& it) {
  if (!is_floating(it.dtypes[0])) return launch_copy_into_exact(it);
  ew::visit_convert<true>(it.dtypes[0], it.dtypes[1], Launch{it});
}

}  // namespace tg::cpu
