// Compiled by the test tensor_temporaries_are_not_assignable (tests/CMakeLists.txt) twice: as it is,
// it must compile; with TG_ASSIGN_TO_TEMPORARY defined, it must not, naming the assignment.
#include "tensor/tensor.h"

void clear_gradient(tg::Tensor& p) {
  p.set_grad(tg::Tensor());  // what the user means
  tg::Tensor g = p.grad();
  g = tg::Tensor();  // a named handle may be rebound
#ifdef TG_ASSIGN_TO_TEMPORARY
  p.grad() = tg::Tensor();  // would rebind a temporary copy: must not compile
#endif
}
