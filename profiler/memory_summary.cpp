// memory_summary(): the caching allocator's counters as a table, as torch.cuda.memory_summary().
#include <cstdio>

#include "profiler/profiler.h"
#include "tensor/cuda_runtime.h"
#include "tensor/device.h"
#include "tensor/memory/cuda_memory.h"

namespace tg::profiler {
namespace {

std::string bytes_str(int64_t b) {
  char buf[32];
  const double v = static_cast<double>(b);
  if (b >= (int64_t{1} << 30)) {
    std::snprintf(buf, sizeof buf, "%.2f GiB", v / (1 << 30));
  } else if (b >= (int64_t{1} << 20)) {
    std::snprintf(buf, sizeof buf, "%.2f MiB", v / (1 << 20));
  } else if (b >= 1024) {
    std::snprintf(buf, sizeof buf, "%.2f KiB", v / 1024);
  } else {
    std::snprintf(buf, sizeof buf, "%lld B", static_cast<long long>(b));
  }
  return buf;
}

}  // namespace

std::string memory_summary(int device) {
  if (!cuda_is_available()) return "memory summary: no CUDA device\n";
  const cuda::MemoryStats s = cuda::memory_stats(device);
  std::string out;
  char line[160];
  const std::string rule(72, '=');
  out += rule + "\n";
  std::snprintf(line, sizeof line, " CUDA memory summary, device %d (the caching allocator, all pools)\n",
                device < 0 ? cuda::current_device() : device);
  out += line;
  out += rule + "\n";
  auto row = [&](const char* name, const std::string& value) {
    std::snprintf(line, sizeof line, " %-44s %25s\n", name, value.c_str());
    out += line;
  };
  row("Allocated memory (current)", bytes_str(s.allocated_bytes));
  row("Allocated memory (peak)", bytes_str(s.peak_allocated_bytes));
  row("Reserved memory (current)", bytes_str(s.reserved_bytes));
  row("Reserved but unallocated (cached)", bytes_str(s.reserved_bytes - s.allocated_bytes));
  row("Active allocations (blocks)", std::to_string(s.live_blocks));
  row("Segments held from the driver", std::to_string(s.segments));
  row("Driver allocations made (cache misses)", std::to_string(s.device_allocations));
  out += rule + "\n";
  return out;
}

}  // namespace tg::profiler
