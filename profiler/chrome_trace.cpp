// Profile::export_chrome_trace: the Chrome trace event format ("traceEvents"), which
// chrome://tracing and Perfetto load. Host events are "X" events of the process, one row per
// thread; device events one row per (device, stream) under a process per device; an arrow ("s"/"f"
// flow events) joins each launching op or replay to the work it launched.
#include <cinttypes>
#include <cstdio>
#include <fstream>
#include <set>
#include <unordered_map>
#include <unistd.h>

#include "profiler/profiler.h"
#include "tensor/check.h"

namespace tg::profiler {
namespace {

// `s` as a JSON string literal.
std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (const char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

std::string us(int64_t ns) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%" PRId64 ".%03" PRId64, ns / 1000, ns % 1000);
  return buf;
}

const char* category(EventKind k) {
  switch (k) {
    case EventKind::Op: return "cpu_op";
    case EventKind::Range: return "user_annotation";
    case EventKind::Kernel: return "kernel";
    case EventKind::Memcpy: return "gpu_memcpy";
    case EventKind::Memset: return "gpu_memset";
    case EventKind::Runtime: return "cuda_runtime";
  }
  return "other";
}

constexpr int64_t kDevicePid = 1000000;  // device d's process id in the trace: kDevicePid + d
constexpr int kRuntimeTid = 1000000;     // the row of CUDA API calls in the host process

}  // namespace

void Profile::export_chrome_trace(const std::string& path) const {
  std::ofstream f(path);
  TG_CHECK(f.good(), "[profiler] cannot write the trace to '", path, "'");
  const long pid = static_cast<long>(getpid());
  f << "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n";
  bool first = true;
  auto emit = [&](const std::string& json) {
    f << (first ? "  " : ",\n  ") << json;
    first = false;
  };
  std::set<int> threads;
  std::set<std::pair<int, int64_t>> streams;
  for (const Event& e : events_) {
    std::string args;
    int64_t p = pid, tid = e.thread;
    if (e.on_device()) {
      p = kDevicePid + e.device;
      tid = e.stream;
      streams.insert({e.device, e.stream});
      args = "\"device\": " + std::to_string(e.device) + ", \"stream\": " + std::to_string(e.stream) +
             ", \"correlation\": " + std::to_string(e.correlation);
      if (e.bytes > 0) args += ", \"bytes\": " + std::to_string(e.bytes);
      if (e.graph_node != 0) args += ", \"graph node\": " + std::to_string(e.graph_node);
      if (!e.graph_op.empty()) args += ", \"recorded by\": " + quoted(e.graph_op);
    } else if (e.kind == EventKind::Runtime) {
      tid = kRuntimeTid;
      args = "\"correlation\": " + std::to_string(e.correlation);
    } else {
      threads.insert(e.thread);
      args = "\"id\": " + std::to_string(e.id);
      if (!e.shapes.empty()) args += ", \"input shapes\": " + quoted(e.shapes);
    }
    emit("{\"ph\": \"X\", \"cat\": \"" + std::string(category(e.kind)) + "\", \"name\": " + quoted(e.name) +
         ", \"pid\": " + std::to_string(p) + ", \"tid\": " + std::to_string(tid) + ", \"ts\": " + us(e.start_ns) +
         ", \"dur\": " + us(e.end_ns - e.start_ns) + ", \"args\": {" + args + "}}");
  }
  // Arrows from each launching host event to the first piece of device work it launched.
  std::unordered_map<int64_t, const Event*> host_by_id;
  for (const Event& e : events_)
    if (e.kind == EventKind::Op || e.kind == EventKind::Range) host_by_id.emplace(e.id, &e);
  std::set<int64_t> drawn;
  for (const Event& e : events_) {
    if (!e.on_device() || e.id == 0 || !drawn.insert(e.id).second) continue;
    auto h = host_by_id.find(e.id);
    if (h == host_by_id.end()) continue;
    const std::string id = std::to_string(e.id);
    emit("{\"ph\": \"s\", \"cat\": \"launch\", \"name\": \"launch\", \"id\": " + id + ", \"pid\": " +
         std::to_string(pid) + ", \"tid\": " + std::to_string(h->second->thread) + ", \"ts\": " +
         us(h->second->start_ns) + "}");
    emit("{\"ph\": \"f\", \"bp\": \"e\", \"cat\": \"launch\", \"name\": \"launch\", \"id\": " + id +
         ", \"pid\": " + std::to_string(kDevicePid + e.device) + ", \"tid\": " + std::to_string(e.stream) +
         ", \"ts\": " + us(e.start_ns) + "}");
  }
  auto meta = [&](int64_t p, int64_t tid, const char* what, const std::string& name) {
    emit("{\"ph\": \"M\", \"name\": \"" + std::string(what) + "\", \"pid\": " + std::to_string(p) +
         ", \"tid\": " + std::to_string(tid) + ", \"args\": {\"name\": " + quoted(name) + "}}");
  };
  meta(pid, 0, "process_name", "host");
  for (int t : threads) meta(pid, t, "thread_name", "thread " + std::to_string(t));
  meta(pid, kRuntimeTid, "thread_name", "CUDA API");
  std::set<int> devices;
  for (const auto& [d, s] : streams) {
    if (devices.insert(d).second) meta(kDevicePid + d, 0, "process_name", "GPU " + std::to_string(d));
    meta(kDevicePid + d, s, "thread_name", "stream " + std::to_string(s));
  }
  f << "\n]}\n";
  TG_CHECK(f.good(), "[profiler] writing the trace to '", path, "' failed");
}

}  // namespace tg::profiler
