#include "tensor/cuda/forked_work.h"

#include <vector>

#include "tensor/cuda/cuda_check.h"
#include "tensor/cuda_runtime.h"

namespace tg::cuda {
namespace {

// Events are reused: creating one per collective would cost a driver call each time.
class EventPool {
 public:
  ~EventPool() {
    for (cudaEvent_t e : free_) cudaEventDestroy(e);
  }
  cudaEvent_t take() {
    if (free_.empty()) {
      cudaEvent_t e = nullptr;
      TG_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
      return e;
    }
    cudaEvent_t e = free_.back();
    free_.pop_back();
    return e;
  }
  void give_back(cudaEvent_t e) { free_.push_back(e); }

 private:
  std::vector<cudaEvent_t> free_;
};

struct ForkedWork {
  cudaEvent_t done;
  TensorList keep_alive;
};

struct ThreadState {
  EventPool events;
  std::vector<ForkedWork> pending;
};

ThreadState& state() {
  thread_local ThreadState s;
  return s;
}

}  // namespace

void fork_to(cudaStream_t side) {
  ThreadState& s = state();
  cudaEvent_t ready = s.events.take();
  TG_CUDA_CHECK(cudaEventRecord(ready, current_stream()));
  TG_CUDA_CHECK(cudaStreamWaitEvent(side, ready, 0));
  s.events.give_back(ready);  // a later record on it does not disturb the wait already queued
}

void note_forked_work(cudaStream_t side, TensorList keep_alive) {
  ThreadState& s = state();
  cudaEvent_t done = s.events.take();
  TG_CUDA_CHECK(cudaEventRecord(done, side));
  s.pending.push_back(ForkedWork{done, std::move(keep_alive)});
}

void join_forked_work() {
  ThreadState& s = state();
  if (s.pending.empty()) return;
  for (ForkedWork& w : s.pending) {
    TG_CUDA_CHECK(cudaStreamWaitEvent(current_stream(), w.done, 0));
    s.events.give_back(w.done);
  }
  s.pending.clear();  // buffers are released after the wait is queued: their reuse is ordered after it
}

}  // namespace tg::cuda
