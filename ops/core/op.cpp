#include "ops/core/op.h"

namespace tg {

TensorList Op::backward(const BackwardContext&, const TensorList&) const {
  TG_FAIL("[", name(), "] is not differentiable: it has no backward formula");
}

bool Op::pointwise(const std::vector<TensorMeta>&, PointwiseMath&) const { return false; }

std::shared_ptr<const Op> Op::redraw() const {
  TG_FAIL("[", name(), "] cannot draw fresh numbers: only random ops can be redrawn");
}

}  // namespace tg
