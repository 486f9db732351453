#include "tensor/cuda/forked_work.h"

#include <algorithm>
#include <exception>
#include <vector>

#include "tensor/cuda/caching_allocator.h"
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
  std::vector<void*> held_frees;  // blocks freed by the work, deallocated once it is joined
};

struct ThreadState {
  ~ThreadState() {
    for (cudaStream_t stream : branches)
      if (stream != nullptr) cudaStreamDestroy(stream);
  }
  EventPool events;
  std::vector<ForkedWork> pending;
  std::vector<cudaStream_t> branches;  // by device index; null until first used
};

ThreadState& state() {
  thread_local ThreadState s;
  return s;
}

// Notes work queued on `side`, with the buffers it uses and the blocks it freed (see ForkedWork).
void note(cudaStream_t side, TensorList keep_alive, std::vector<void*> held_frees) {
  ThreadState& s = state();
  cudaEvent_t done = s.events.take();
  TG_CUDA_CHECK(cudaEventRecord(done, side));
  s.pending.push_back(ForkedWork{done, std::move(keep_alive), std::move(held_frees)});
}

}  // namespace

void fork_to(cudaStream_t side) {
  ThreadState& s = state();
  cudaEvent_t ready = s.events.take();
  TG_CUDA_CHECK(cudaEventRecord(ready, current_stream()));
  TG_CUDA_CHECK(cudaStreamWaitEvent(side, ready, 0));
  s.events.give_back(ready);  // a later record on it does not disturb the wait already queued
}

void note_forked_work(cudaStream_t side, TensorList keep_alive) { note(side, std::move(keep_alive), {}); }

void join_forked_work() {
  ThreadState& s = state();
  if (s.pending.empty()) return;
  // Taken off the list first: a wait that fails (a capture that cannot depend on work queued outside
  // it) must not leave the work pending for every later join to fail on again.
  std::vector<ForkedWork> joined = std::move(s.pending);
  s.pending.clear();
  cudaError_t failed = cudaSuccess;
  for (ForkedWork& w : joined) {
    if (failed == cudaSuccess) failed = cudaStreamWaitEvent(current_stream(), w.done, 0);
    s.events.give_back(w.done);
  }
  // Buffers are released after the waits are queued: their reuse is ordered after them.
  for (ForkedWork& w : joined)
    for (void* block : w.held_frees) CachingAllocator::get().deallocate(block);
  TG_CUDA_CHECK(failed);
}

cudaStream_t branch_stream() {
  ThreadState& s = state();
  const auto device = static_cast<size_t>(current_device());
  if (s.branches.size() <= device) s.branches.resize(device + 1, nullptr);
  cudaStream_t& stream = s.branches[device];
  if (stream == nullptr) TG_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  return stream;
}

bool is_branch_stream(cudaStream_t stream) {
  if (stream == nullptr) return false;
  const std::vector<cudaStream_t>& branches = state().branches;
  return std::find(branches.begin(), branches.end(), stream) != branches.end();
}

TensorList run_on_branch(const std::function<TensorList()>& work, TensorList keep_alive) {
  const cudaStream_t side = branch_stream();
  fork_to(side);
  std::vector<void*> held;
  TensorList results;
  std::exception_ptr failure;
  {
    StreamGuard on_branch(side);
    CachingAllocator::hold_frees(&held);
    try {
      results = work();
    } catch (...) {
      failure = std::current_exception();
    }
    CachingAllocator::hold_frees(nullptr);
  }
  keep_alive.insert(keep_alive.end(), results.begin(), results.end());
  note(side, std::move(keep_alive), std::move(held));  // joined like any forked work, even after a failure
  if (failure) std::rethrow_exception(failure);
  return results;
}

}  // namespace tg::cuda
