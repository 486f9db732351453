// Stage classification of device work, by op name first and kernel name second.
#include "profiler/stages.h"

#include <cstdio>
#include <unordered_map>

namespace tg::profiler {
namespace {

bool has(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }
bool starts(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

// The stage a kernel's own name gives away: library kernels and the families of tapegraph's own.
Stage stage_of_kernel(const std::string& k) {
  if (has(k, "sdpa") || has(k, "flash") || has(k, "fmha") || has(k, "attention")) return Stage::Attention;
  if (has(k, "gemm") || has(k, "nvjet") || has(k, "xmma") || has(k, "cutlass") || has(k, "cublas") ||
      has(k, "matmul"))
    return Stage::Matmul;
  if (has(k, "ConvertFn")) return Stage::Cast;
  if (has(k, "row_norm") || has(k, "layer_norm") || has(k, "batch_norm") || has(k, "group_norm"))
    return Stage::Norm;
  if (has(k, "cross_entropy") || has(k, "nll") || has(k, "log_softmax")) return Stage::Loss;
  if (has(k, "adam") || has(k, "sgd") || has(k, "optim") || has(k, "multi_tensor")) return Stage::Optimizer;
  if (has(k, "vectorized_kernel") || has(k, "strided_kernel") || has(k, "fused_elementwise") || has(k, "tg_fused"))
    return Stage::Elementwise;
  if (starts(k, "Memcpy") || starts(k, "Memset")) return Stage::Memory;
  return Stage::Other;
}

}  // namespace

const char* stage_name(Stage s) {
  switch (s) {
    case Stage::Attention: return "attention";
    case Stage::Matmul: return "matmul";
    case Stage::Norm: return "norms";
    case Stage::Elementwise: return "elementwise";
    case Stage::Cast: return "casts";
    case Stage::Loss: return "loss";
    case Stage::Optimizer: return "optimizer";
    case Stage::Memory: return "copies and fills";
    case Stage::Other: return "other";
  }
  return "other";
}

Stage stage_of_op(const std::string& op) {
  if (op.empty()) return Stage::Other;
  if (has(op, "attention") || has(op, "sdpa")) return Stage::Attention;
  if (starts(op, "linear_cross_entropy") || has(op, "cross_entropy") || starts(op, "nll_loss") ||
      starts(op, "log_softmax"))
    return Stage::Loss;
  if (starts(op, "linear") || op == "mm" || op == "bmm" || op == "addmm" || starts(op, "matmul") ||
      starts(op, "conv"))
    return Stage::Matmul;
  if (has(op, "norm") && !starts(op, "multi_tensor_norm")) return Stage::Norm;
  if (starts(op, "adam") || starts(op, "sgd") || starts(op, "multi_tensor_norm") || has(op, "clip"))
    return Stage::Optimizer;
  if (op == "to" || op == "_to_copy" || op == "copy_" || op == "contiguous" || op == "clone") return Stage::Cast;
  return Stage::Other;
}

Stage stage_of(const Event& e, const std::string& op) {
  // Library kernels say what they compute, whichever op launched them (the LM head's products are
  // matmuls although linear_cross_entropy launches them).
  const Stage by_name = stage_of_kernel(e.name);
  if (by_name == Stage::Matmul || by_name == Stage::Attention) return by_name;
  const Stage by_op = stage_of_op(op);
  if (by_op == Stage::Cast) return by_name == Stage::Cast ? Stage::Cast : Stage::Memory;  // a copy that converts
  if (by_op != Stage::Other) return by_op;
  return by_name;
}

std::vector<StageTime> stage_breakdown(const Profile& profile) {
  std::vector<StageTime> out;
  for (int s = 0; s <= static_cast<int>(Stage::Other); ++s) out.push_back({static_cast<Stage>(s)});
  std::unordered_map<int64_t, const Event*> host;
  for (const Event& e : profile.events())
    if (e.kind == EventKind::Op || e.kind == EventKind::Range) host.emplace(e.id, &e);
  for (const Event& e : profile.events()) {
    if (!e.on_device()) continue;
    std::string op = e.graph_op;
    if (op.empty()) {
      // The innermost op around the launch (a graph replay's range names no op).
      for (int64_t id = e.id; id != 0 && op.empty();) {
        auto it = host.find(id);
        if (it == host.end()) break;
        if (it->second->kind == EventKind::Op) op = it->second->name;
        id = it->second->parent;
      }
    }
    StageTime& st = out[static_cast<size_t>(stage_of(e, op))];
    st.device_us += e.duration_us();
    ++st.kernels;
  }
  return out;
}

std::string stage_table(const std::vector<StageTime>& stages, int steps) {
  double total = 0;
  for (const StageTime& s : stages) total += s.device_us;
  const double n = steps > 0 ? steps : 1;
  std::string out;
  char line[160];
  std::snprintf(line, sizeof line, "%-18s %14s %8s %12s\n", "stage", "ms per step", "share", "kernels/step");
  out += line;
  for (const StageTime& s : stages) {
    std::snprintf(line, sizeof line, "%-18s %14.3f %7.1f%% %12.1f\n", stage_name(s.stage), s.device_us / 1000.0 / n,
                  total > 0 ? 100.0 * s.device_us / total : 0.0, static_cast<double>(s.kernels) / n);
    out += line;
  }
  std::snprintf(line, sizeof line, "%-18s %14.3f %7.1f%%\n", "total", total / 1000.0 / n, 100.0);
  out += line;
  return out;
}

}  // namespace tg::profiler
