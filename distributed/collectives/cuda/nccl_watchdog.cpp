// See Note [Named hangs] in docs/data_parallel.md.
#include "distributed/collectives/cuda/nccl_watchdog.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "tensor/cuda/cuda_check.h"
#include "tensor/cuda/device_guard.h"

namespace tg::distributed {
namespace {

std::string seconds(std::chrono::milliseconds d) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f s", static_cast<double>(d.count()) / 1000.0);
  return buf;
}

}  // namespace

void NcclWatchdog::start(ncclComm_t comm) {
  comm_ = comm;
  started_ = true;
  thread_ = std::thread([this] { loop(); });
}

void NcclWatchdog::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  std::lock_guard<std::mutex> lock(mutex_);
  for (Item& item : items_) cudaEventDestroy(item.done);
  for (cudaEvent_t e : free_events_) cudaEventDestroy(e);
  items_.clear();
  free_events_.clear();
}

cudaEvent_t NcclWatchdog::take_event() {
  if (!free_events_.empty()) {
    cudaEvent_t e = free_events_.back();
    free_events_.pop_back();
    return e;
  }
  cudaEvent_t e = nullptr;
  TG_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  return e;
}

void NcclWatchdog::watch(const char* name, const std::string& context, cudaStream_t stream) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (stopping_ || !started_) return;
  Item item;
  item.done = take_event();
  TG_CUDA_CHECK(cudaEventRecord(item.done, stream));
  item.queued = Clock::now();
  item.what = describe_collective(name, ++sequence_, context);
  items_.push_back(std::move(item));
}

void NcclWatchdog::replayed(const std::string& graph, const std::vector<std::shared_ptr<const CapturedNote>>& held) {
  if (held.empty()) return;
  cuda::DeviceGuard on_device(device_);  // the replay ran on this device's current stream
  std::lock_guard<std::mutex> lock(mutex_);
  if (stopping_ || !started_) return;
  Item item;
  item.done = take_event();
  TG_CUDA_CHECK(cudaEventRecord(item.done, cuda::current_stream()));
  item.queued = Clock::now();
  item.graph = graph;
  item.held = held;
  item.first_sequence = sequence_ + 1;
  sequence_ += static_cast<int64_t>(held.size());  // every rank replays alike: the numbers stay in step
  for (const auto& note : held) {
    const auto& context = static_cast<const CapturedCollective&>(*note).context;
    if (context.step) {
      item.step = context.step->load();
      item.counted_by_step = true;
      break;
    }
  }
  if (!item.counted_by_step) item.step = replays_[graph]++;
  items_.push_back(std::move(item));
}

std::string NcclWatchdog::describe_wait(const Item& item) const {
  if (item.graph.empty()) return "in " + item.what;
  constexpr size_t kListed = 8;
  std::string holding;
  for (size_t i = 0; i < item.held.size() && i < kListed; ++i) {
    const auto& c = static_cast<const CapturedCollective&>(*item.held[i]);
    holding += (i == 0 ? "" : ", ") + std::string(c.name) + " #" + std::to_string(item.first_sequence + i) +
               (c.context.label.empty() ? "" : " for " + c.context.label);
  }
  if (item.held.size() > kListed) holding += " and " + std::to_string(item.held.size() - kListed) + " more";
  const auto last = last_completed_.find(item.graph);
  const std::string completed = last == last_completed_.end() ? "none yet" : std::to_string(last->second);
  return "inside a replayed CUDA graph (" + item.graph + ", holding " + holding + "), " +
         (item.counted_by_step ? "step " + std::to_string(item.step) + "; the last step whose replay completed: "
                               : "replay " + std::to_string(item.step) + "; the last replay that completed: ") +
         completed;
}

void NcclWatchdog::fail(const std::string& why) {
  std::fprintf(stderr, "[distributed] %s; aborting the communicator and exiting\n", why.c_str());
  std::fflush(stderr);
  // ncclCommAbort ends the kernels spinning in a collective; should it block itself, the process
  // still leaves shortly after.
  const auto grace = std::clamp(timeout_, std::chrono::milliseconds(1000), std::chrono::milliseconds(10000));
  std::thread([grace] {
    std::this_thread::sleep_for(grace);
    std::_Exit(1);
  }).detach();
  ncclCommAbort(comm_);
  std::_Exit(1);
}

void NcclWatchdog::loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    wake_.wait_for(lock, std::chrono::milliseconds(100));
    if (stopping_) break;
    // Events of different streams complete out of order: every item is looked at.
    for (auto it = items_.begin(); it != items_.end();) {
      if (cudaEventQuery(it->done) != cudaSuccess) {
        ++it;
        continue;
      }
      if (!it->graph.empty()) {
        auto [last, fresh] = last_completed_.emplace(it->graph, it->step);
        if (!fresh) last->second = std::max(last->second, it->step);
      }
      free_events_.push_back(it->done);
      it = items_.erase(it);
    }
    ncclResult_t async_error = ncclSuccess;
    if (ncclCommGetAsyncError(comm_, &async_error) == ncclSuccess && async_error != ncclSuccess &&
        async_error != ncclInProgress)
      fail("rank " + std::to_string(rank_) + ": NCCL reported an asynchronous error: " +
           ncclGetErrorString(async_error) + " (a peer rank probably died)" +
           (items_.empty() ? std::string() : " while waiting " + describe_wait(items_.front())));
    if (!items_.empty() && Clock::now() - items_.front().queued > timeout_)
      fail("rank " + std::to_string(rank_) + " waited " + seconds(timeout_) + " " + describe_wait(items_.front()) +
           " (a peer rank died, hangs, or issued different collectives)");
  }
}

}  // namespace tg::distributed
