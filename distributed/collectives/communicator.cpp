// See Note [Data-parallel internals] in docs/data_parallel.md.
#include "distributed/collectives/communicator.h"

namespace tg::distributed {
namespace {

void copy_unless_same(const Tensor& in, Tensor out) {
  if (in.impl()->data() != out.impl()->data()) out.copy_(in);
}

}  // namespace

void SelfCommunicator::all_reduce(const Tensor& in, const Tensor& out, ReduceOp, bool) { copy_unless_same(in, out); }
void SelfCommunicator::all_reduce_into(const TensorList& ins, const Tensor& flat, ReduceOp, bool) {
  int64_t offset = 0;
  for (const Tensor& t : ins) {
    copy_unless_same(t, flat.narrow(0, offset, t.numel()).view(t.sizes()));
    offset += t.numel();
  }
}
void SelfCommunicator::broadcast(const Tensor& in, const Tensor& out, int) { copy_unless_same(in, out); }
void SelfCommunicator::all_gather(const Tensor& in, const Tensor& out, bool) {
  copy_unless_same(in, out.view(in.sizes()));
}
void SelfCommunicator::reduce_scatter(const Tensor& in, const Tensor& out, ReduceOp, bool) {
  copy_unless_same(in.view(out.sizes()), out);
}

}  // namespace tg::distributed
