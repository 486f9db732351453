#include "ops/op.h"

namespace tg {

TensorList Op::backward(const BackwardContext&, const TensorList&) const {
  TG_FAIL("[", name(), "] is not differentiable: it has no backward formula");
}

}  // namespace tg
