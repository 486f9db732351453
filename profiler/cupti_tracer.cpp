// CUPTI's activity API for the profiler, its functions looked up with dlopen/dlsym.
// See Note [Profiler] in docs/profiler.md.
#include "profiler/cupti_tracer.h"

#include "tensor/check.h"

#if defined(TG_WITH_CUDA) && defined(TG_WITH_CUPTI)
#include <cupti.h>
#include <cxxabi.h>
#include <dlfcn.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string_view>
#include <unordered_map>

#include "tensor/cuda_runtime.h"
#include "tensor/device.h"
#endif

namespace tg::profiler {

#if defined(TG_WITH_CUDA) && defined(TG_WITH_CUPTI)
namespace {

// The CUPTI functions the tracer calls.
struct CuptiApi {
  decltype(&cuptiActivityEnable) activity_enable = nullptr;
  decltype(&cuptiActivityDisable) activity_disable = nullptr;
  decltype(&cuptiActivityRegisterCallbacks) register_callbacks = nullptr;
  decltype(&cuptiActivityFlushAll) flush_all = nullptr;
  decltype(&cuptiActivityGetNextRecord) next_record = nullptr;
  decltype(&cuptiActivityPushExternalCorrelationId) push_external = nullptr;
  decltype(&cuptiActivityPopExternalCorrelationId) pop_external = nullptr;
  decltype(&cuptiSubscribe) subscribe = nullptr;
  decltype(&cuptiUnsubscribe) unsubscribe = nullptr;
  decltype(&cuptiEnableCallback) enable_callback = nullptr;
  decltype(&cuptiGetGraphNodeId) graph_node_id = nullptr;
  decltype(&cuptiGetTimestamp) timestamp = nullptr;
  decltype(&cuptiGetResultString) result_string = nullptr;
  decltype(&cuptiGetCallbackName) callback_name = nullptr;
};

// libcupti, opened once: TG_CUPTI_LIBRARY, then the library CMake found, then the loader's search.
const CuptiApi* cupti_api(std::string& why) {
  static const CuptiApi api = [] {
    CuptiApi a;
    std::vector<std::string> candidates;
    if (const char* env = std::getenv("TG_CUPTI_LIBRARY"); env != nullptr && *env != '\0') candidates.push_back(env);
#ifdef TG_CUPTI_LIBRARY_PATH
    candidates.push_back(TG_CUPTI_LIBRARY_PATH);
#endif
    candidates.push_back("libcupti.so." + std::to_string(CUPTI_API_VERSION / 10000));
    candidates.push_back("libcupti.so");
    void* lib = nullptr;
    for (const std::string& name : candidates)
      if ((lib = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL)) != nullptr) break;
    if (lib == nullptr) return a;
    auto load = [&](auto& fn, const char* name) { fn = reinterpret_cast<std::decay_t<decltype(fn)>>(dlsym(lib, name)); };
    load(a.activity_enable, "cuptiActivityEnable");
    load(a.activity_disable, "cuptiActivityDisable");
    load(a.register_callbacks, "cuptiActivityRegisterCallbacks");
    load(a.flush_all, "cuptiActivityFlushAll");
    load(a.next_record, "cuptiActivityGetNextRecord");
    load(a.push_external, "cuptiActivityPushExternalCorrelationId");
    load(a.pop_external, "cuptiActivityPopExternalCorrelationId");
    load(a.subscribe, "cuptiSubscribe");
    load(a.unsubscribe, "cuptiUnsubscribe");
    load(a.enable_callback, "cuptiEnableCallback");
    load(a.graph_node_id, "cuptiGetGraphNodeId");
    load(a.timestamp, "cuptiGetTimestamp");
    load(a.result_string, "cuptiGetResultString");
    load(a.callback_name, "cuptiGetCallbackName");
    return a;
  }();
  const bool complete = api.activity_enable && api.activity_disable && api.register_callbacks && api.flush_all &&
                        api.next_record && api.push_external && api.pop_external && api.timestamp &&
                        api.result_string;
  if (!complete) {
    why = "libcupti was not found (set TG_CUPTI_LIBRARY to its path) or lacks the activity API";
    return nullptr;
  }
  return &api;
}

// The kernel's name, demangled, without its return type and parameter list.
std::string kernel_name(const char* mangled) {
  if (mangled == nullptr) return "(unnamed kernel)";
  int status = 0;
  char* plain = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
  std::string name = status == 0 && plain != nullptr ? plain : mangled;
  std::free(plain);
  if (name.rfind("void ", 0) == 0) name.erase(0, 5);  // a function template's name starts with it
  // Cut "(args...)" at the top level: template arguments keep their parentheses, and so does
  // "(anonymous namespace)".
  static constexpr std::string_view kAnonymous = "(anonymous namespace)";
  int depth = 0;
  for (size_t i = 0; i < name.size(); ++i) {
    if (name.compare(i, kAnonymous.size(), kAnonymous) == 0) {
      i += kAnonymous.size() - 1;
      continue;
    }
    if (name[i] == '<') ++depth;
    if (name[i] == '>') --depth;
    if (name[i] == '(' && depth == 0 && i > 0) return name.substr(0, i);
  }
  return name;
}

const char* memcpy_name(uint8_t kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD: return "Memcpy HtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH: return "Memcpy DtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD: return "Memcpy DtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP: return "Memcpy PtoP";
    default: return "Memcpy";
  }
}

// Waits for the work queued on every device.
void synchronize_devices() {
  for (int d = 0; d < cuda_device_count(); ++d) cuda::synchronize(d);
}

constexpr size_t kBufferBytes = size_t{8} << 20;
constexpr CUpti_ActivityKind kKinds[] = {
    CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET,
    CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_ACTIVITY_KIND_DRIVER, CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION};

// The fields every device activity record (kernel, memcpy, memset) carries, into e.
template <typename Record>
void take_device_fields(const Record& r, Event& e) {
  e.start_ns = static_cast<int64_t>(r.start);
  e.end_ns = static_cast<int64_t>(r.end);
  e.device = static_cast<int>(r.deviceId);
  e.stream = r.streamId;
  e.correlation = r.correlationId;
  e.graph_node = r.graphNodeId;
}

}  // namespace

struct CuptiTracer::State {
  const CuptiApi* api = nullptr;
  std::function<std::string()> current_op;
  CUpti_SubscriberHandle subscriber = nullptr;
  std::mutex mutex;
  std::vector<Event> device;                                // device events and API calls, CUPTI's clock
  std::unordered_map<uint32_t, int64_t> launcher;           // correlation id -> host event id
  std::unordered_map<uint64_t, std::string> node_op;        // graph node id -> op that recorded it

  void check(CUptiResult r, const char* what) const {
    if (r == CUPTI_SUCCESS) return;
    const char* s = nullptr;
    api->result_string(r, &s);
    TG_FAIL("[profiler] ", what, " failed: ", s != nullptr ? s : "unknown CUPTI error");
  }

  // Converts one completed buffer's records.
  void take(uint8_t* buffer, size_t valid) {
    CUpti_Activity* record = nullptr;
    std::lock_guard<std::mutex> lock(mutex);
    while (api->next_record(buffer, valid, &record) == CUPTI_SUCCESS) {
      Event e;
      switch (record->kind) {
        case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
        case CUPTI_ACTIVITY_KIND_KERNEL: {
          const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
          e.kind = EventKind::Kernel;
          e.name = kernel_name(k->name);
          take_device_fields(*k, e);
          break;
        }
        case CUPTI_ACTIVITY_KIND_MEMCPY: {
          const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(record);
          e.kind = EventKind::Memcpy;
          e.name = memcpy_name(m->copyKind);
          take_device_fields(*m, e);
          e.bytes = static_cast<int64_t>(m->bytes);
          break;
        }
        case CUPTI_ACTIVITY_KIND_MEMSET: {
          const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(record);
          e.kind = EventKind::Memset;
          e.name = "Memset";
          take_device_fields(*m, e);
          e.bytes = static_cast<int64_t>(m->bytes);
          break;
        }
        case CUPTI_ACTIVITY_KIND_RUNTIME:
        case CUPTI_ACTIVITY_KIND_DRIVER: {
          const auto* a = reinterpret_cast<const CUpti_ActivityAPI*>(record);
          const char* name = nullptr;
          if (api->callback_name != nullptr) {
            api->callback_name(record->kind == CUPTI_ACTIVITY_KIND_RUNTIME ? CUPTI_CB_DOMAIN_RUNTIME_API
                                                                          : CUPTI_CB_DOMAIN_DRIVER_API,
                               a->cbid, &name);
          }
          e.kind = EventKind::Runtime;
          e.name = name != nullptr ? name : "CUDA API call";
          e.start_ns = static_cast<int64_t>(a->start);
          e.end_ns = static_cast<int64_t>(a->end);
          e.correlation = a->correlationId;
          break;
        }
        case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: {
          const auto* c = reinterpret_cast<const CUpti_ActivityExternalCorrelation*>(record);
          if (c->externalKind == CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0)
            launcher[c->correlationId] = static_cast<int64_t>(c->externalId);
          continue;
        }
        default:
          continue;
      }
      device.push_back(std::move(e));
    }
  }
};

namespace {

std::atomic<CuptiTracer::State*> g_active{nullptr};

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = kBufferBytes;
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  if (CuptiTracer::State* s = g_active.load()) s->take(buffer, valid);
  std::free(buffer);
}

// Names graph nodes as they are created (stream capture included) and cloned (instantiation).
void CUPTIAPI on_resource(void* userdata, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data) {
  if (domain != CUPTI_CB_DOMAIN_RESOURCE) return;
  auto* s = static_cast<CuptiTracer::State*>(userdata);
  const auto* graph = static_cast<const CUpti_GraphData*>(static_cast<const CUpti_ResourceData*>(data)->resourceDescriptor);
  uint64_t id = 0;
  if (graph == nullptr || s->api->graph_node_id(graph->node, &id) != CUPTI_SUCCESS) return;
  if (cbid == CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED) {
    std::string op = s->current_op();
    if (op.empty()) return;
    std::lock_guard<std::mutex> lock(s->mutex);
    s->node_op[id] = std::move(op);
  } else if (cbid == CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED) {
    uint64_t original = 0;
    if (s->api->graph_node_id(graph->originalNode, &original) != CUPTI_SUCCESS) return;
    std::lock_guard<std::mutex> lock(s->mutex);
    auto it = s->node_op.find(original);
    if (it != s->node_op.end()) s->node_op[id] = it->second;
  }
}

}  // namespace

std::unique_ptr<CuptiTracer> CuptiTracer::start(std::function<std::string()> current_op, std::string& why) {
  if (!cuda_is_available()) {
    why = "no CUDA device";
    return nullptr;
  }
  const CuptiApi* api = cupti_api(why);
  if (api == nullptr) return nullptr;
  auto state = std::make_unique<State>();
  state->api = api;
  state->current_op = std::move(current_op);
  State* expected = nullptr;
  if (!g_active.compare_exchange_strong(expected, state.get())) {
    why = "another profiler is tracing the device";
    return nullptr;
  }
  const CUptiResult registered = api->register_callbacks(buffer_requested, buffer_completed);
  if (registered != CUPTI_SUCCESS) {
    g_active.store(nullptr);
    const char* s = nullptr;
    api->result_string(registered, &s);
    why = std::string("CUPTI refused to trace: ") + (s != nullptr ? s : "unknown error");
    return nullptr;
  }
  for (CUpti_ActivityKind kind : kKinds) state->check(api->activity_enable(kind), "cuptiActivityEnable");
  // Graph node names need a callback subscriber; a second CUPTI client (a tool) may hold it, and
  // then graph work is still traced, only without its ops' names.
  if (api->subscribe != nullptr && api->enable_callback != nullptr && api->graph_node_id != nullptr &&
      api->subscribe(&state->subscriber, reinterpret_cast<CUpti_CallbackFunc>(on_resource), state.get()) ==
          CUPTI_SUCCESS) {
    api->enable_callback(1, state->subscriber, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED);
    api->enable_callback(1, state->subscriber, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED);
  } else {
    state->subscriber = nullptr;
  }
  return std::unique_ptr<CuptiTracer>(new CuptiTracer(std::move(state)));
}

CuptiTracer::CuptiTracer(std::unique_ptr<State> state) : state_(std::move(state)) {}

CuptiTracer::~CuptiTracer() {
  if (!state_) return;
  if (g_active.load() == state_.get()) finish(0);
}

void CuptiTracer::push_launcher(int64_t id) {
  state_->api->push_external(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, static_cast<uint64_t>(id));
}

void CuptiTracer::pop_launcher() {
  uint64_t last = 0;
  state_->api->pop_external(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &last);
}

uint64_t CuptiTracer::now_ns() const {
  uint64_t t = 0;
  state_->api->timestamp(&t);
  return t;
}

void CuptiTracer::discard() {
  synchronize_devices();
  state_->api->flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  std::lock_guard<std::mutex> lock(state_->mutex);
  state_->device.clear();
  state_->launcher.clear();
}

std::vector<Event> CuptiTracer::finish(int64_t offset_ns) {
  State& s = *state_;
  synchronize_devices();
  s.api->flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  for (CUpti_ActivityKind kind : kKinds) s.api->activity_disable(kind);
  if (s.subscriber != nullptr) s.api->unsubscribe(s.subscriber);
  s.subscriber = nullptr;
  g_active.store(nullptr);
  std::lock_guard<std::mutex> lock(s.mutex);
  std::vector<Event> out = std::move(s.device);
  for (Event& e : out) {
    e.start_ns += offset_ns;
    e.end_ns += offset_ns;
    auto it = s.launcher.find(e.correlation);
    if (it != s.launcher.end()) e.id = it->second;
    if (e.graph_node != 0) {
      auto op = s.node_op.find(e.graph_node);
      if (op != s.node_op.end()) e.graph_op = op->second;
    }
  }
  return out;
}

#else  // no CUDA or no CUPTI headers: host events only

struct CuptiTracer::State {};

std::unique_ptr<CuptiTracer> CuptiTracer::start(std::function<std::string()>, std::string& why) {
#ifdef TG_WITH_CUDA
  why = "built without CUPTI's headers";
#else
  why = "built without CUDA";
#endif
  return nullptr;
}
CuptiTracer::CuptiTracer(std::unique_ptr<State> state) : state_(std::move(state)) {}
CuptiTracer::~CuptiTracer() = default;
void CuptiTracer::push_launcher(int64_t) {}
void CuptiTracer::pop_launcher() {}
uint64_t CuptiTracer::now_ns() const { return 0; }
void CuptiTracer::discard() {}
std::vector<Event> CuptiTracer::finish(int64_t) { return {}; }

#endif

}  // namespace tg::profiler
