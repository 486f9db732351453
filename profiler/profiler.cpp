// The profiler's recording: the one range listener (ops/core/profile_hooks.h) and its sessions.
// See Note [Profiler] in docs/profiler.md.
#include "profiler/profiler.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>

#include "ops/core/profile_hooks.h"
#include "profiler/cupti_tracer.h"
#include "tensor/check.h"
#include "tensor/device.h"
#include "tensor/memory/cuda_memory.h"
#include "tensor/shape.h"

#ifdef TG_WITH_CUDA
#include <nvtx3/nvToolsExt.h>
#endif

namespace tg::profiler {
namespace {

using Clock = std::chrono::steady_clock;

// The caching allocator's counters on the current device (zeros without one).
MemorySnapshot memory_now() {
  MemorySnapshot m;
  if (!cuda_is_available()) return m;
  const cuda::MemoryStats s = cuda::memory_stats();
  m.allocated_bytes = s.allocated_bytes;
  m.reserved_bytes = s.reserved_bytes;
  m.peak_allocated_bytes = s.peak_allocated_bytes;
  return m;
}

std::string shapes_of(const TensorList& inputs) {
  std::string s;
  for (const Tensor& t : inputs) {
    if (!s.empty()) s += ", ";
    s += t.defined() ? shape_str(t.sizes()) : "[]";
  }
  return s;
}

}  // namespace

// One recording: host events closed so far, the device tracer, the clock.
struct Profiler::Session {
  ProfilerOptions options;
  uint64_t generation = 0;
  Clock::time_point t0;
  std::atomic<int64_t> reset_ns{0};
  std::unique_ptr<CuptiTracer> cupti;
  int64_t cupti_offset_ns = 0;  // host clock = CUPTI clock + offset
  std::string device_note;
  MemorySnapshot at_start;
  std::mutex mutex;
  std::vector<Event> host;
  std::atomic<int64_t> next_id{1};
  std::atomic<int> next_thread{0};

  int64_t now_ns() const { return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count(); }
};

namespace {

// A range this thread opened, whether or not a session was recording when it did.
struct OpenRange {
  Event event;
  uint64_t generation = 0;  // the session it belongs to; 0: none
};

// This thread's open ranges, and its number in the session that numbered it.
struct ThreadState {
  std::vector<OpenRange> open;
  uint64_t numbered_in = 0;
  int number = 0;
};
thread_local ThreadState t_thread;

// The listener installed while a session records. It outlives every session (it is never
// destroyed), so a range that began during a session can end after it stopped.
class Recorder final : public RangeListener {
 public:
  void attach(Profiler::Session* s) { active_.store(s, std::memory_order_release); }
  void detach() { active_.store(nullptr, std::memory_order_release); }
  Profiler::Session* active() const { return active_.load(std::memory_order_acquire); }

  void begin_op(const Op& op, const TensorList& inputs) override {
    Profiler::Session* s = active();
    Event e;
    e.kind = EventKind::Op;
    e.name = std::string(op.name());
    if (s != nullptr && s->options.record_shapes) e.shapes = shapes_of(inputs);
    open(s, std::move(e));
  }

  void begin_range(const std::string& name, const char*) override {
    Event e;
    e.kind = EventKind::Range;
    e.name = name;
    open(active(), std::move(e));
  }

  void end() override {
    if (t_thread.open.empty()) return;
    OpenRange r = std::move(t_thread.open.back());
    t_thread.open.pop_back();
    Profiler::Session* s = active();
    if (s == nullptr || r.generation != s->generation) return;
    r.event.end_ns = s->now_ns();
    if (s->cupti) s->cupti->pop_launcher();
#ifdef TG_WITH_CUDA
    if (s->options.nvtx) nvtxRangePop();
#endif
    if (r.event.start_ns < s->reset_ns.load(std::memory_order_relaxed)) return;
    std::lock_guard<std::mutex> lock(s->mutex);
    s->host.push_back(std::move(r.event));
  }

  // The innermost open op of this thread in the running session ("" when none).
  std::string current_op() const {
    Profiler::Session* s = active();
    for (auto it = t_thread.open.rbegin(); it != t_thread.open.rend(); ++it)
      if (s != nullptr && it->generation == s->generation && it->event.kind == EventKind::Op) return it->event.name;
    return {};
  }

 private:
  void open(Profiler::Session* s, Event e) {
    OpenRange r;
    if (s != nullptr) {
      if (t_thread.numbered_in != s->generation) {
        t_thread.numbered_in = s->generation;
        t_thread.number = s->next_thread.fetch_add(1);
      }
      r.generation = s->generation;
      e.thread = t_thread.number;
      e.id = s->next_id.fetch_add(1);
      for (auto it = t_thread.open.rbegin(); it != t_thread.open.rend(); ++it) {
        if (it->generation == s->generation) {
          e.parent = it->event.id;
          break;
        }
      }
      e.start_ns = s->now_ns();
      if (s->cupti) s->cupti->push_launcher(e.id);
#ifdef TG_WITH_CUDA
      if (s->options.nvtx) nvtxRangePushA(e.name.c_str());
#endif
    }
    r.event = std::move(e);
    t_thread.open.push_back(std::move(r));
  }

  std::atomic<Profiler::Session*> active_{nullptr};
};

Recorder& recorder() {
  static Recorder* r = new Recorder();  // never destroyed: see Recorder
  return *r;
}

std::atomic<uint64_t> g_generation{0};

}  // namespace

Profiler::Profiler(ProfilerOptions options) : options_(options) {}

Profiler::~Profiler() {
  if (recording()) stop();
}

bool Profiler::recording() const { return session_ != nullptr; }

void Profiler::start() {
  TG_CHECK(!recording(), "[profiler] start() called on a profiler that is already recording");
  TG_CHECK(range_listener() == nullptr, "[profiler] another profiler is recording in this process; stop it first");
  auto s = std::make_unique<Session>();
  s->options = options_;
  s->generation = ++g_generation;
  s->at_start = memory_now();
  if (options_.cuda) {
    s->cupti = CuptiTracer::start([] { return recorder().current_op(); }, s->device_note);
  } else {
    s->device_note = "device activity not asked for (ProfilerOptions::cuda is false)";
  }
  s->t0 = Clock::now();
  if (s->cupti) {
    const int64_t before = s->now_ns();
    const int64_t device = static_cast<int64_t>(s->cupti->now_ns());
    const int64_t after = s->now_ns();
    s->cupti_offset_ns = (before + after) / 2 - device;
  }
  recorder().attach(s.get());
  set_range_listener(&recorder());
  session_ = std::move(s);
}

void Profiler::reset() {
  TG_CHECK(recording(), "[profiler] reset() needs a recording profiler (call start() first)");
  Session& s = *session_;
  if (s.cupti) s.cupti->discard();
  s.reset_ns.store(s.now_ns());
  std::lock_guard<std::mutex> lock(s.mutex);
  s.host.clear();
}

const Profile& Profiler::stop() {
  TG_CHECK(recording(), "[profiler] stop() called on a profiler that is not recording");
  std::unique_ptr<Session> s = std::move(session_);
  std::vector<Event> device;
  if (s->cupti) {
    device = s->cupti->finish(s->cupti_offset_ns);
    s->cupti.reset();
  }
  set_range_listener(nullptr);
  recorder().detach();
  std::vector<Event> events;
  {
    std::lock_guard<std::mutex> lock(s->mutex);
    events = std::move(s->host);
  }
  const int64_t reset = s->reset_ns.load();
  for (Event& e : device)
    if (e.start_ns >= reset) events.push_back(std::move(e));
  profile_ = Profile(std::move(events), s->device_note, s->at_start, memory_now());
  return profile_;
}

Profile::Profile(std::vector<Event> events, std::string device_note, MemorySnapshot at_start, MemorySnapshot at_stop)
    : events_(std::move(events)), device_note_(std::move(device_note)), at_start_(at_start), at_stop_(at_stop) {
  std::stable_sort(events_.begin(), events_.end(), [](const Event& a, const Event& b) {
    const bool da = a.on_device() || a.kind == EventKind::Runtime, db = b.on_device() || b.kind == EventKind::Runtime;
    if (da != db) return !da;
    return a.start_ns < b.start_ns;
  });
}

std::vector<KeyAverage> Profile::key_averages(bool group_by_shapes) const {
  return profiler::key_averages(events_, group_by_shapes);
}

std::string Profile::table(const TableOptions& options) const { return profiler::table(key_averages(), options); }

}  // namespace tg::profiler
