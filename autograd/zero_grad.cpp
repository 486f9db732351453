#include "autograd/zero_grad.h"

#include "ops/elementwise/copy.h"
#include "tensor/grad_mode.h"

namespace tg {

void zero_grad(const TensorList& tensors, bool set_to_none) {
  NoGradGuard no_grad;
  for (const Tensor& p : tensors) {
    Tensor g = p.grad();
    if (!g.defined()) continue;
    if (set_to_none) {
      p.set_grad(Tensor());
    } else {
      g.detach_();
      g.zero_();
    }
  }
}

}  // namespace tg
