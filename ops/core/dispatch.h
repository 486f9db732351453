// The single path every op call takes: infer, allocate, run the kernel, record on the tape.
#pragma once

#include "ops/core/guarded_value.h"
#include "ops/core/op.h"

namespace tg {

// Runs `op` on `inputs` and returns its outputs. Infers metadata, creates outputs (fresh, views or
// the mutated input), runs the kernel unless the tensors hold no data (meta/fake), notifies the
// active op observer (tracing), and records a tape node when grad mode is on and an input requires grad.
TensorList dispatch(const OpPtr& op, TensorList inputs);
// dispatch() for single-output ops.
Tensor dispatch1(const OpPtr& op, TensorList inputs);

// Builds the op and dispatches it: call_op<AddOp>({a, b}, args...).
template <typename OpT, typename... Args>
Tensor call_op(TensorList inputs, Args&&... args) {
  return dispatch1(std::make_shared<const OpT>(std::forward<Args>(args)...), std::move(inputs));
}

// Sees every dispatched op; the graph tracer implements this.
class OpObserver {
 public:
  virtual ~OpObserver() = default;
  // Called before infer(); may substitute inputs (the tracer swaps captured real tensors for proxies).
  virtual void before_op(const OpPtr& op, TensorList& inputs) = 0;
  // True when fresh outputs must hold no data even if every input has data (traced factories).
  virtual bool wants_fake_outputs(const OpPtr& op, const TensorList& inputs) = 0;
  // Called once outputs exist, after the kernel (when one ran) and after tape recording.
  virtual void on_op(const OpPtr& op, const TensorList& inputs, const TensorList& outputs) = 0;
  // Called when traced code reads a host value it specializes on (see Guarded<T>).
  virtual void on_host_guard(HostGuard guard) { (void)guard; }
};

// Infers, allocates and runs `op` with no tape, no observer and no in-place checks: what graph
// executors call for each node. Fresh outputs hold no data when `fake` is true.
TensorList run_kernel(const Op& op, const TensorList& inputs, bool fake = false);

// The observer for ops dispatched on this thread (null when none).
OpObserver* current_op_observer();
// Installs an observer for the current thread for the guard's lifetime.
class OpObserverGuard {
 public:
  explicit OpObserverGuard(OpObserver* observer);
  ~OpObserverGuard();
  OpObserverGuard(const OpObserverGuard&) = delete;
  OpObserverGuard& operator=(const OpObserverGuard&) = delete;

 private:
  OpObserver* previous_;
};

// Common validation helpers used by infer() rules.
// The single device of the inputs (0-dim CPU tensors may join CUDA operands); errors otherwise.
Device common_device(const char* op, const TensorList& inputs);
// Errors unless `t` has a floating dtype.
void check_floating(const char* op, const Tensor& t);

}  // namespace tg
