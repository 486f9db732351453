// GradScaler: dynamic loss scaling for float16 training, as torch.amp.GradScaler. The scale, the
// found-inf flag and the growth counter live on the device, and every decision (skip the update,
// back off, grow) is made there: no host synchronization, so a scaled step can be captured in a
// CUDA graph and replayed.
#pragma once

#include <cstdint>

#include "optim/optimizer.h"

namespace tg::optim {

// PyTorch's defaults.
struct GradScalerOptions {
  double init_scale = 65536.0;
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;  // finite steps in a row before the scale grows
  bool enabled = true;             // off: scale() returns the loss and step() is a plain step
};

class GradScaler {
 public:
  // Keeps its state on `device` (that of the parameters it will see).
  explicit GradScaler(Device device, GradScalerOptions options = {});

  // loss * scale.
  Tensor scale(const Tensor& loss) const;
  // Divides the optimizer's gradients by the scale in place and records in found_inf() whether any
  // of them holds an inf or NaN. At most once between update() calls (step() calls it if needed).
  void unscale_(Optimizer& optimizer);
  // Unscales (if not done yet) and applies the optimizer's update unless found_inf() is set.
  void step(Optimizer& optimizer);
  // Backs the scale off after a step that found an inf or NaN, grows it after growth_interval
  // finite steps in a row, and clears the flag for the next step.
  void update();

  // The current scale (a float32 scalar on the device).
  const Tensor& get_scale() const { return scale_; }
  // 1 when the gradients of this step held an inf or NaN, else 0 (a float32 scalar on the device).
  const Tensor& found_inf() const { return found_inf_; }
  bool enabled() const { return options_.enabled; }

 private:
  GradScalerOptions options_;
  Tensor scale_, found_inf_, growth_tracker_;
  bool unscaled_ = false;
};

}  // namespace tg::optim
