// A scope in which the random initializers of nn/init.h draw nothing: for a module that builds
// submodules and then initializes their parameters again itself (GPT does), so that the
// submodules' default draws, which it overwrites, cost no time. The generator still advances by
// every skipped draw, so each later draw, and hence every parameter, keeps its value.
#pragma once

namespace tg::nn::init {

// While alive, uniform_, normal_ and the initializers built on them, called on this thread, only
// advance the generator past their draws and leave the tensor as it was (uninitialized memory
// stays so: the owner must initialize it again). Guards nest.
class SkipDrawsGuard {
 public:
  SkipDrawsGuard();
  ~SkipDrawsGuard();
  SkipDrawsGuard(const SkipDrawsGuard&) = delete;
  SkipDrawsGuard& operator=(const SkipDrawsGuard&) = delete;

 private:
  bool previous_;
};

// True inside a SkipDrawsGuard on this thread.
bool skipping_draws();

}  // namespace tg::nn::init
