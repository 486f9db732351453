// train_gpt --profile: tg::profiler around a few training steps after warm-up. It records from
// the first step (so it sees the CUDA graphs being recorded and names the op of every graph node),
// drops the warm-up, and after the profiled steps writes the Chrome trace and prints the tables.
#pragma once

#include <cstdio>
#include <memory>
#include <string>

#include "profiler/profiler.h"
#include "profiler/stages.h"
#include "tensor/cuda_runtime.h"
#include "tensor/device.h"

namespace gpt {

class StepProfiler {
 public:
  // Profiles steps warmup + 1 to warmup + steps, writing the trace to `path`; inactive when `path` is empty.
  StepProfiler(std::string path, int64_t warmup, int64_t steps)
      : path_(std::move(path)), warmup_(warmup), steps_(steps) {
    if (path_.empty()) return;
    profiler_ = std::make_unique<tg::profiler::Profiler>();
    profiler_->start();
  }

  // Call after each training step (`step` counts from 1).
  void after_step(int64_t step) {
    if (!profiler_ || !profiler_->recording()) return;
    if (step == warmup_) {
      if (tg::cuda_is_available()) tg::cuda::synchronize();
      profiler_->reset();
    }
    last_step_ = step;
    if (step == warmup_ + steps_) report(steps_);
  }

  // Call after the last step: reports a profile that the run ended before completing.
  void finish() {
    if (profiler_ && profiler_->recording()) report(last_step_ > warmup_ ? last_step_ - warmup_ : last_step_);
  }

 private:
  void report(int64_t steps) {
    const tg::profiler::Profile& p = profiler_->stop();
    p.export_chrome_trace(path_);
    const int64_t first = last_step_ > warmup_ ? warmup_ + 1 : 1;
    std::printf("\n--- profile of steps %lld to %lld (trace: %s) ---\n", static_cast<long long>(first),
                static_cast<long long>(first + steps - 1), path_.c_str());
    std::printf("%s\n", p.table({.row_limit = 25}).c_str());
    if (p.device_note().empty()) {
      std::printf("device time by stage:\n%s\n",
                  tg::profiler::stage_table(tg::profiler::stage_breakdown(p), static_cast<int>(steps)).c_str());
      std::printf("%s", tg::profiler::memory_summary().c_str());
    } else {
      std::printf("host times only: %s\n", p.device_note().c_str());
    }
    std::fflush(stdout);
  }

  std::string path_;
  int64_t warmup_, steps_, last_step_ = 0;
  std::unique_ptr<tg::profiler::Profiler> profiler_;
};

}  // namespace gpt
