#include "graphs/calls/dynamic_scalar.h"

#include "ops/core/dispatch.h"
#include "ops/factory/factory.h"

namespace tg {

Tensor DynamicScalar::tensor() const {
  // Made with tracing paused: inside a traced function it would otherwise become a graph constant.
  OpObserverGuard not_traced(nullptr);
  return full({}, value, {.dtype = dtype});
}

}  // namespace tg
