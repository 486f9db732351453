// Host Philox4x32-10 that reproduces curand's Philox stream bit for bit, so CPU and CUDA draw alike.
#pragma once

#include <array>
#include <cstdint>

#include "ops/random/random_dist.h"

namespace tg {

// 128-bit counter (low word first) and 64-bit key, as curand's uint4 ctr and uint2 key.
using PhiloxCounter = std::array<uint32_t, 4>;
using PhiloxKey = std::array<uint32_t, 2>;

// Ten Philox rounds (Salmon et al. 2011) with the Weyl key schedule; the pure block function.
inline PhiloxCounter philox4x32_10(PhiloxCounter c, PhiloxKey k) {
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;  // key bumps: golden ratio, sqrt(3) - 1
  constexpr uint64_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;  // round multipliers
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      k[0] += kW0;
      k[1] += kW1;
    }
    const uint64_t p0 = kM0 * c[0];
    const uint64_t p1 = kM1 * c[2];
    c = {static_cast<uint32_t>(p1 >> 32) ^ c[1] ^ k[0], static_cast<uint32_t>(p1),
         static_cast<uint32_t>(p0 >> 32) ^ c[3] ^ k[1], static_cast<uint32_t>(p0)};
  }
  return c;
}

// The key curand_init derives from a 64-bit seed.
inline PhiloxKey philox_key(uint64_t seed) {
  return {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)};
}

// Block `index` of the stream for `seed`: the first curand4() after curand_init(seed, 0, 4 * index).
// Random ops map their element blocks here, so a block is computed without walking the stream.
inline PhiloxCounter philox_block(uint64_t seed, uint64_t index) {
  return philox4x32_10({static_cast<uint32_t>(index), static_cast<uint32_t>(index >> 32), 0, 0}, philox_key(seed));
}

// Mirror of curandStatePhilox4_32_10_t: same initialization, skip-ahead and output order, so a test
// (or a host fallback) can follow any curand Philox stream on the CPU.
class PhiloxStream {
 public:
  // curand_init(seed, subsequence, offset, &state); offset counts 32-bit outputs.
  PhiloxStream(uint64_t seed, uint64_t subsequence, uint64_t offset) : key_(philox_key(seed)) {
    skipahead_sequence(subsequence);
    skipahead(offset);
  }

  // Skips n 32-bit outputs (curand's skipahead).
  void skipahead(uint64_t n) {
    state_ += static_cast<uint32_t>(n & 3);
    n /= 4;
    if (state_ > 3) {
      n += 1;
      state_ -= 4;
    }
    advance(n);
    output_ = philox4x32_10(ctr_, key_);
  }

  // Skips n subsequences of 2^66 outputs each (curand's skipahead_sequence).
  void skipahead_sequence(uint64_t n) {
    const uint32_t lo = static_cast<uint32_t>(n);
    uint32_t hi = static_cast<uint32_t>(n >> 32);
    ctr_[2] += lo;
    if (ctr_[2] < lo) ++hi;
    ctr_[3] += hi;
    output_ = philox4x32_10(ctr_, key_);
  }

  // One 32-bit output (curand()).
  uint32_t next() {
    const uint32_t r = output_[state_++];
    if (state_ == 4) {
      step();
      output_ = philox4x32_10(ctr_, key_);
      state_ = 0;
    }
    return r;
  }

  // Four 32-bit outputs (curand4()); like curand, it does not move the position within a block.
  PhiloxCounter next4() {
    const PhiloxCounter cur = output_;
    step();
    output_ = philox4x32_10(ctr_, key_);
    PhiloxCounter r{};
    for (uint32_t i = 0; i < 4; ++i) r[i] = i + state_ < 4 ? cur[i + state_] : output_[i + state_ - 4];
    return r;
  }

  // curand_uniform4(): x * 2^-32 + 2^-33 in float, so the range is (0, 1] (1.0f does occur).
  std::array<float, 4> uniform4() {
    const PhiloxCounter x = next4();
    std::array<float, 4> r{};
    for (int i = 0; i < 4; ++i) r[i] = static_cast<float>(x[i]) * kTwoPowM32f + kTwoPowM32f / 2.0f;
    return r;
  }

  // curand_normal4(): Box-Muller over the pairs (x, y) and (z, w) of one curand4().
  std::array<float, 4> normal4() {
    const PhiloxCounter x = next4();
    std::array<float, 4> r{};
    box_muller_float(x[0], x[1], r[0], r[1]);
    box_muller_float(x[2], x[3], r[2], r[3]);
    return r;
  }

  // curand_normal2_double(): one Box-Muller pair from the four words of one curand4().
  std::array<double, 2> normal2_double() {
    const PhiloxCounter x = next4();
    std::array<double, 2> r{};
    box_muller_double(x[0], x[1], x[2], x[3], r[0], r[1]);
    return r;
  }

 private:
  static constexpr float kTwoPowM32f = 2.3283064e-10f;  // curand's CURAND_2POW32_INV

  // Adds n to the counter with curand's carry rule (Philox_State_Incr(state, n)).
  void advance(uint64_t n) {
    const uint32_t lo = static_cast<uint32_t>(n);
    uint32_t hi = static_cast<uint32_t>(n >> 32);
    ctr_[0] += lo;
    if (ctr_[0] < lo) ++hi;
    ctr_[1] += hi;
    if (hi <= ctr_[1]) return;
    if (++ctr_[2]) return;
    ++ctr_[3];
  }

  // Adds one to the counter (Philox_State_Incr(state)).
  void step() {
    if (++ctr_[0]) return;
    if (++ctr_[1]) return;
    if (++ctr_[2]) return;
    ++ctr_[3];
  }

  PhiloxCounter ctr_{0, 0, 0, 0};
  PhiloxKey key_;
  PhiloxCounter output_{};
  uint32_t state_ = 0;
};

}  // namespace tg
