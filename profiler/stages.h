// A training step's device time by stage (attention, matrix products, norms, elementwise, casts,
// the loss, the optimizer), the breakdown bench/RESULTS.md puts beside PyTorch's.
#pragma once

#include <string>
#include <vector>

#include "profiler/profiler.h"

namespace tg::profiler {

// The stages, in the order breakdowns print them.
enum class Stage { Attention, Matmul, Norm, Elementwise, Cast, Loss, Optimizer, Memory, Other };

// A stage's name as breakdowns print it ("attention", "matmul", ...).
const char* stage_name(Stage s);

// The stage of an op, by its name ("linear", "layer_norm", "adam_step_", ...); Other when the name
// says nothing.
Stage stage_of_op(const std::string& op);
// The stage of a piece of device work: a library's matrix product or attention kernel by its name,
// anything else by the op that launched or recorded it (`op`, may be empty) and, where the op says
// nothing, by the kernel's own name.
Stage stage_of(const Event& device_event, const std::string& op);

// Device time per stage over a profile, in microseconds, every stage listed (zeros included).
struct StageTime {
  Stage stage;
  double device_us = 0;
  int64_t kernels = 0;
};
std::vector<StageTime> stage_breakdown(const Profile& profile);
// The breakdown as a text table, each stage's time per step over `steps` steps and its share.
std::string stage_table(const std::vector<StageTime>& stages, int steps = 1);

}  // namespace tg::profiler
