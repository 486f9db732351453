// See Note [Asynchronous collectives] in docs/data_parallel.md.
#include "distributed/collectives/cuda/async_results.h"

#include <cstddef>
#include <utility>
#include <vector>

#include "tensor/cuda/cuda_check.h"

namespace tg::distributed {
namespace {

// One collective in flight: the memory it writes, an event after it, and where it was queued.
struct AsyncResult {
  const void* memory = nullptr;
  cudaEvent_t done = nullptr;
  int device = 0;
  cudaStream_t stream = nullptr;
  unsigned long long capture = 0;  // the capture it was queued in; 0: none
  TensorList operands;
};

// The capture `stream` takes part in, or 0.
unsigned long long capture_of(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  unsigned long long id = 0;
  TG_CUDA_CHECK(cudaStreamGetCaptureInfo(stream, &status, &id));
  return status == cudaStreamCaptureStatusNone ? 0 : id;
}

struct ThreadState {
  ~ThreadState() {
    for (AsyncResult& r : pending) cudaEventDestroy(r.done);
    for (auto& [device, e] : free_events) cudaEventDestroy(e);
  }

  // An event of `device` (the current one), reused: one per collective would cost a driver call each.
  cudaEvent_t take_event(int device) {
    for (size_t i = 0; i < free_events.size(); ++i) {
      if (free_events[i].first != device) continue;
      const cudaEvent_t e = free_events[i].second;
      free_events.erase(free_events.begin() + static_cast<std::ptrdiff_t>(i));
      return e;
    }
    cudaEvent_t e = nullptr;
    TG_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    return e;
  }

  // Forgets results no wait will join any more: those of a capture that has ended (its end joined
  // them into the graph) and, outside captures, those whose collective has completed.
  void prune() {
    const bool capturing = capture_of(cuda::current_stream()) != 0;
    auto over = [&](const AsyncResult& r) {
      if (r.capture != 0) return capture_of(r.stream) != r.capture;
      if (capturing) return false;  // no queries while a capture is open
      const cudaError_t state = cudaEventQuery(r.done);
      if (state == cudaErrorNotReady) {
        (void)cudaGetLastError();
        return false;
      }
      TG_CUDA_CHECK(state);
      return true;
    };
    for (size_t i = 0; i < pending.size();) {
      if (over(pending[i])) {
        release(i);
      } else {
        ++i;
      }
    }
  }

  // Drops entry i; its event goes back to the pool (a later record does not disturb a wait queued on it).
  void release(size_t i) {
    free_events.emplace_back(pending[i].device, pending[i].done);
    pending.erase(pending.begin() + static_cast<std::ptrdiff_t>(i));
  }

  std::vector<AsyncResult> pending;  // in the order they were queued
  std::vector<std::pair<int, cudaEvent_t>> free_events;
};

ThreadState& state() {
  thread_local ThreadState s;
  return s;
}

}  // namespace

void note_async_result(cudaStream_t stream, const Tensor& result, TensorList operands) {
  ThreadState& s = state();
  s.prune();
  AsyncResult r;
  r.memory = result.impl()->storage()->data();
  TG_CUDA_CHECK(cudaGetDevice(&r.device));
  r.done = s.take_event(r.device);
  TG_CUDA_CHECK(cudaEventRecord(r.done, stream));
  r.stream = stream;
  r.capture = capture_of(stream);
  r.operands = std::move(operands);
  s.pending.push_back(std::move(r));
}

void wait_async_result(const Tensor& t) {
  if (!t.defined() || !t.device().is_cuda() || t.impl()->storage()->is_fake()) return;
  ThreadState& s = state();
  const void* memory = t.impl()->storage()->data();
  for (size_t i = s.pending.size(); i-- > 0;) {
    if (s.pending[i].memory != memory) continue;
    const cudaStream_t current = cuda::current_stream();
    if (s.pending[i].capture != capture_of(current)) return;  // joined already, or pruned later
    TG_CUDA_CHECK(cudaStreamWaitEvent(current, s.pending[i].done, 0));
    // The operands are released after the wait is queued: their memory's reuse is ordered after it.
    s.release(i);
    return;
  }
}

}  // namespace tg::distributed
