// The process-wide Philox generator: one seed, and an offset that every random op advances.
#include "ops/random/random.h"

#include <mutex>

namespace tg {
namespace {
std::mutex& generator_mutex() {
  static std::mutex m;
  return m;
}
}  // namespace

Generator& Generator::global() {
  static Generator g;
  return g;
}

void Generator::set_seed(uint64_t seed) {
  std::lock_guard<std::mutex> lock(generator_mutex());
  seed_ = seed;
  offset_ = 0;
}

PhiloxState Generator::state() const {
  std::lock_guard<std::mutex> lock(generator_mutex());
  return PhiloxState{seed_, offset_};
}

void Generator::set_state(PhiloxState state) {
  std::lock_guard<std::mutex> lock(generator_mutex());
  seed_ = state.seed;
  offset_ = state.offset;
}

PhiloxState Generator::reserve(uint64_t count) {
  // Ops may be created from several threads; each must get a disjoint range of blocks.
  std::lock_guard<std::mutex> lock(generator_mutex());
  const PhiloxState state{seed_, offset_};
  offset_ += count;
  return state;
}

namespace {
thread_local CaptureRandomness* t_capture_randomness = nullptr;
}  // namespace

CaptureRandomness* current_capture_randomness() { return t_capture_randomness; }
void set_capture_randomness(CaptureRandomness* context) { t_capture_randomness = context; }

}  // namespace tg
