// key_averages() and table(): events grouped by name, device time attributed to the ops that
// launched it. See Note [Profiler] in docs/profiler.md.
#include "profiler/key_averages.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <unordered_map>

#include "tensor/check.h"

namespace tg::profiler {
namespace {

bool is_host(const Event& e) { return e.kind == EventKind::Op || e.kind == EventKind::Range; }

std::string fit(const std::string& name, int width) {
  if (width <= 3 || static_cast<int>(name.size()) <= width) return name;
  return name.substr(0, static_cast<size_t>(width - 3)) + "...";
}

std::string time_str(double us) {
  char buf[32];
  if (us >= 1e6) {
    std::snprintf(buf, sizeof buf, "%.3fs", us / 1e6);
  } else if (us >= 1e3) {
    std::snprintf(buf, sizeof buf, "%.3fms", us / 1e3);
  } else {
    std::snprintf(buf, sizeof buf, "%.3fus", us);
  }
  return buf;
}

std::string percent_str(double part, double whole) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f%%", whole > 0 ? 100.0 * part / whole : 0.0);
  return buf;
}

double sort_key(const KeyAverage& r, const std::string& by) {
  if (by == "device_total") return r.device_total_us;
  if (by == "device_self") return r.device_self_us;
  if (by == "host_total") return r.host_total_us;
  if (by == "host_self") return r.host_self_us;
  if (by == "count") return static_cast<double>(r.count);
  TG_FAIL("[profiler] table sort_by is '", by, "', expected device_total, device_self, host_total, host_self or count");
}

}  // namespace

std::vector<KeyAverage> key_averages(const std::vector<Event>& events, bool group_by_shapes) {
  std::unordered_map<int64_t, size_t> by_id;  // host event id -> index
  for (size_t i = 0; i < events.size(); ++i)
    if (is_host(events[i])) by_id[events[i].id] = i;

  std::map<std::pair<int, std::string>, KeyAverage> rows;  // (host 0 / device 1, name + shapes)
  auto row_of = [&](const Event& e) -> KeyAverage& {
    const bool host = is_host(e);
    const std::string shapes = host && group_by_shapes ? e.shapes : std::string();
    KeyAverage& r = rows[{host ? 0 : 1, e.name + "\n" + shapes}];
    r.name = e.name;
    r.shapes = shapes;
    r.kind = e.kind;
    return r;
  };
  auto op_row = [&](const std::string& name) -> KeyAverage& {
    KeyAverage& r = rows[{0, name + "\n"}];
    r.name = name;
    r.kind = EventKind::Op;
    return r;
  };

  for (const Event& e : events) {
    if (is_host(e)) {
      KeyAverage& r = row_of(e);
      ++r.count;
      r.host_total_us += e.duration_us();
      r.host_self_us += e.duration_us();
      auto parent = by_id.find(e.parent);
      if (e.parent != 0 && parent != by_id.end()) row_of(events[parent->second]).host_self_us -= e.duration_us();
      continue;
    }
    if (!e.on_device()) continue;
    const double d = e.duration_us();
    KeyAverage& dev = row_of(e);
    ++dev.count;
    dev.device_total_us += d;
    dev.device_self_us += d;
    // The host event that launched it gets it as its own; every enclosing one in its total. Work a
    // CUDA graph ran for a node an op recorded is the op's own, and its replay's in total only.
    bool self_taken = false;
    if (!e.graph_op.empty()) {
      KeyAverage& op = op_row(e.graph_op);
      op.device_total_us += d;
      op.device_self_us += d;
      op.graph_device_us += d;
      self_taken = true;
    }
    for (int64_t id = e.id; id != 0;) {
      auto it = by_id.find(id);
      if (it == by_id.end()) break;
      const Event& h = events[it->second];
      KeyAverage& r = row_of(h);
      r.device_total_us += d;
      if (!self_taken) r.device_self_us += d;
      self_taken = true;
      id = h.parent;
    }
  }
  std::vector<KeyAverage> out;
  out.reserve(rows.size());
  for (auto& [key, r] : rows) out.push_back(std::move(r));
  std::stable_sort(out.begin(), out.end(), [](const KeyAverage& a, const KeyAverage& b) {
    if (a.device_total_us != b.device_total_us) return a.device_total_us > b.device_total_us;
    return a.host_total_us > b.host_total_us;
  });
  return out;
}

std::string table(const std::vector<KeyAverage>& rows, const TableOptions& options) {
  std::vector<const KeyAverage*> shown;
  double host_self = 0, device_self = 0;
  for (const KeyAverage& r : rows) {
    const bool device = r.kind == EventKind::Kernel || r.kind == EventKind::Memcpy || r.kind == EventKind::Memset;
    if (!device) host_self += r.host_self_us;
    if (device) device_self += r.device_self_us;
    if (device && !options.device_rows) continue;
    shown.push_back(&r);
  }
  std::stable_sort(shown.begin(), shown.end(), [&](const KeyAverage* a, const KeyAverage* b) {
    return sort_key(*a, options.sort_by) > sort_key(*b, options.sort_by);
  });
  if (options.row_limit > 0 && static_cast<int>(shown.size()) > options.row_limit)
    shown.resize(static_cast<size_t>(options.row_limit));

  const int w = std::max(options.name_width, 4);
  std::string out;
  char line[512];
  auto rule = [&] { out += std::string(static_cast<size_t>(w) + 128, '-') + "\n"; };
  rule();
  std::snprintf(line, sizeof line, "%-*s %11s %11s %11s %11s %11s %11s %11s %11s %9s\n", w, "Name", "Self CPU %",
                "Self CPU", "CPU total", "CPU avg", "Self CUDA", "Self CUDA %", "CUDA total", "CUDA avg", "# Calls");
  out += line;
  rule();
  for (const KeyAverage* r : shown) {
    const double calls = static_cast<double>(std::max<int64_t>(r->count, 1));
    const std::string name = fit(r->shapes.empty() ? r->name : r->name + " " + r->shapes, w);
    std::snprintf(line, sizeof line, "%-*s %11s %11s %11s %11s %11s %11s %11s %11s %9lld\n", w, name.c_str(),
                  percent_str(r->host_self_us, host_self).c_str(), time_str(r->host_self_us).c_str(),
                  time_str(r->host_total_us).c_str(), time_str(r->host_total_us / calls).c_str(),
                  time_str(r->device_self_us).c_str(), percent_str(r->device_self_us, device_self).c_str(),
                  time_str(r->device_total_us).c_str(), time_str(r->device_total_us / calls).c_str(),
                  static_cast<long long>(r->count));
    out += line;
  }
  rule();
  out += "Self CPU time total: " + time_str(host_self) + "\n";
  out += "Self CUDA time total: " + time_str(device_self) + "\n";
  return out;
}

}  // namespace tg::profiler
