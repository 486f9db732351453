// See Note [Asynchronous collectives] in docs/data_parallel.md.
#include "distributed/collectives/collective_wait.h"

#include "ops/core/dispatch.h"

#ifdef TG_WITH_CUDA
#include "distributed/collectives/cuda/async_results.h"
#endif

namespace tg::distributed {
namespace {

// A view of its input whose eval makes the current stream wait for the collective writing it
// (kStreamWait: the dispatcher runs it, and the tracer reads the storage through it afterwards).
class CollectiveWaitOp final : public Op {
 public:
  const OpSchema& schema() const override {
    static const OpSchema s{.name = "collective_wait", .flags = kView | kStreamWait, .view_of = 0};
    return s;
  }
  SaveSpec saves() const override { return {.inputs = false}; }
  std::vector<TensorMeta> infer(const TensorList& in) const override {
    TG_CHECK(in[0].defined(), "[collective_wait] got an undefined tensor");
    return single_output(meta_of(in[0]));
  }
  void eval(const TensorList& in, TensorList&) const override { wait_for_collective(in[0]); }
  TensorList backward(const BackwardContext&, const TensorList& grads) const override { return {grads[0]}; }
};

}  // namespace

Tensor collective_wait(const Tensor& t) { return call_op<CollectiveWaitOp>({t}); }

void wait_for_collective(const Tensor& t) {
#ifdef TG_WITH_CUDA
  wait_async_result(t);
#else
  (void)t;
#endif
}

}  // namespace tg::distributed
