// Thread-local switch that decides whether ops record on the tape.
#pragma once

namespace tg {

// True when ops on this thread record tape nodes (the default).
bool is_grad_enabled();
// Turns recording on or off for this thread.
void set_grad_enabled(bool enabled);

// Restores the previous grad mode on destruction.
class GradModeGuard {
 public:
  explicit GradModeGuard(bool enabled) : previous_(is_grad_enabled()) { set_grad_enabled(enabled); }
  ~GradModeGuard() { set_grad_enabled(previous_); }
  GradModeGuard(const GradModeGuard&) = delete;
  GradModeGuard& operator=(const GradModeGuard&) = delete;

 private:
  bool previous_;
};

// Disables recording for its scope, like torch.no_grad().
class NoGradGuard : public GradModeGuard {
 public:
  NoGradGuard() : GradModeGuard(false) {}
};

}  // namespace tg
