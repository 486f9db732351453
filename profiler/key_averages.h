// Events grouped by name (and optionally input shapes) into totals, and the table that prints
// them, as torch.profiler's key_averages() and its table() do.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "profiler/event.h"

namespace tg::profiler {

// One row: every event of one name (and shapes).
struct KeyAverage {
  std::string name;
  std::string shapes;  // with group_by_shapes
  EventKind kind = EventKind::Op;
  int64_t count = 0;             // calls (ops, ranges); executions (device work)
  double host_total_us = 0;      // wall time inside the events, nested events included
  double host_self_us = 0;       // host_total_us minus the nested ops and ranges
  double device_total_us = 0;    // device work launched inside the events, nested events included
  double device_self_us = 0;     // device work launched by the events themselves
  // Ops: device work that CUDA graph replays ran for nodes this op recorded (also in device_*).
  double graph_device_us = 0;
};

// Totals per name over `events`, ordered by device_total_us, then host_total_us. Ops run inside
// CUDA graphs count their graph work (Event::graph_op) in device_total_us and device_self_us.
std::vector<KeyAverage> key_averages(const std::vector<Event>& events, bool group_by_shapes = false);

// How table() orders and cuts its rows.
struct TableOptions {
  // "device_total" (default), "device_self", "host_total", "host_self" or "count".
  std::string sort_by = "device_total";
  int row_limit = 30;           // rows printed (<= 0: all)
  bool device_rows = true;      // also print a row per kernel, copy and fill name
  int name_width = 60;          // names longer than this are cut with "..."
};

// The rows as a fixed-width text table with totals, as torch.profiler prints it.
std::string table(const std::vector<KeyAverage>& rows, const TableOptions& options = {});

}  // namespace tg::profiler
