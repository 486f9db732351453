// Philox known answers, the curand-compatible host stream, and the random factories.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <set>

#include "ops/core/dispatch.h"
#include "ops/random/philox.h"
#include "ops/random/random.h"
#include "ops/random/random_dist.h"
#include "support/test_support.h"

namespace tg {
namespace {

// Records every op dispatched while it is installed.
struct CaptureOps : OpObserver {
  void before_op(const OpPtr&, TensorList&) override {}
  bool wants_fake_outputs(const OpPtr&, const TensorList&) override { return false; }
  std::vector<OpPtr> ops;
  void on_op(const OpPtr& op, const TensorList&, const TensorList&) override { ops.push_back(op); }
};

double mean_of(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return s / static_cast<double>(v.size());
}

double std_of(const std::vector<double>& v) {
  const double m = mean_of(v);
  double s = 0;
  for (double x : v) s += (x - m) * (x - m);
  return std::sqrt(s / static_cast<double>(v.size() - 1));
}

// ---- Philox4x32-10 known answers (Random123's kat_vectors, 10 rounds) -------------------------

TEST(Philox, KnownAnswerZero) {
  EXPECT_EQ(philox4x32_10({0, 0, 0, 0}, {0, 0}), (PhiloxCounter{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}));
}

TEST(Philox, KnownAnswerAllOnes) {
  const uint32_t f = 0xffffffffu;
  EXPECT_EQ(philox4x32_10({f, f, f, f}, {f, f}), (PhiloxCounter{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}));
}

TEST(Philox, KnownAnswerPi) {
  EXPECT_EQ(philox4x32_10({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0}),
            (PhiloxCounter{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}));
}

TEST(Philox, SeedSplitsIntoKeyLowWordFirst) {
  const uint64_t seed = 0x299f31d0a4093822ull;
  EXPECT_EQ(philox_key(seed), (PhiloxKey{0xa4093822, 0x299f31d0}));
  EXPECT_EQ(philox_block(seed, 0x85a308d3243f6a88ull), philox4x32_10({0x243f6a88, 0x85a308d3, 0, 0}, philox_key(seed)));
}

// ---- the curand-compatible stream -------------------------------------------------------------

TEST(PhiloxStream, Next4WalksConsecutiveBlocks) {
  PhiloxStream s(42, 0, 0);
  for (uint64_t b = 0; b < 5; ++b) EXPECT_EQ(s.next4(), philox_block(42, b)) << "block " << b;
}

TEST(PhiloxStream, OffsetCountsThirtyTwoBitDraws) {
  // The flattened stream of words 0..39; a stream started at any offset continues it exactly.
  std::vector<uint32_t> words;
  for (uint64_t b = 0; b < 10; ++b)
    for (uint32_t w : philox_block(7, b)) words.push_back(w);
  for (uint64_t off = 0; off < 9; ++off) {
    PhiloxStream s(7, 0, off);
    for (size_t i = off; i < off + 12; ++i) EXPECT_EQ(s.next(), words[i]) << "offset " << off << " word " << i;
  }
}

TEST(PhiloxStream, Next4KeepsPositionWithinBlock) {
  std::vector<uint32_t> words;
  for (uint64_t b = 0; b < 6; ++b)
    for (uint32_t w : philox_block(9, b)) words.push_back(w);
  for (uint64_t off = 0; off < 4; ++off) {
    PhiloxStream s(9, 0, off);
    for (size_t k = 0; k < 3; ++k) {
      const PhiloxCounter r = s.next4();
      for (size_t j = 0; j < 4; ++j) EXPECT_EQ(r[j], words[off + 4 * k + j]) << "offset " << off;
    }
    EXPECT_EQ(s.next(), words[off + 12]);
  }
}

TEST(PhiloxStream, SkipaheadMatchesDrawing) {
  PhiloxStream a(3, 0, 0), b(3, 0, 0);
  for (int i = 0; i < 7; ++i) a.next();
  b.skipahead(7);
  for (int i = 0; i < 9; ++i) EXPECT_EQ(a.next(), b.next());
  PhiloxStream c(3, 0, 0);
  c.skipahead(uint64_t{1} << 36);  // crosses into the counter's second word
  EXPECT_EQ(c.next4(), philox_block(3, uint64_t{1} << 34));
}

TEST(PhiloxStream, SubsequenceIsTheCounterHighHalf) {
  const uint64_t sub = 0x0000000500000003ull;
  PhiloxStream s(11, sub, 4);
  EXPECT_EQ(s.next4(), philox4x32_10({1, 0, 3, 5}, philox_key(11)));
}

TEST(PhiloxStream, UniformAndNormalFollowCurandFormulas) {
  PhiloxStream raw(5, 0, 0), uni(5, 0, 0), nor(5, 0, 0), dbl(5, 0, 0);
  for (int k = 0; k < 50; ++k) {
    const PhiloxCounter x = raw.next4();
    const std::array<float, 4> u = uni.uniform4();
    for (int i = 0; i < 4; ++i) {
      EXPECT_EQ(u[i], static_cast<float>(x[i]) * 2.3283064e-10f + 2.3283064e-10f / 2.0f);
      EXPECT_GT(u[i], 0.0f);
      EXPECT_LE(u[i], 1.0f);
    }
    const std::array<float, 4> n = nor.normal4();
    float a = 0, b = 0;
    box_muller_float(x[0], x[1], a, b);
    EXPECT_EQ(n[0], a);
    EXPECT_EQ(n[1], b);
    // Box-Muller keeps the radius: a^2 + b^2 = -2 log(u).
    const float u0 = static_cast<float>(x[0]) * 2.3283064e-10f + 2.3283064e-10f / 2.0f;
    EXPECT_NEAR(a * a + b * b, -2.0f * std::log(u0), 1e-4f * (1.0f - 2.0f * std::log(u0)));
    const std::array<double, 2> d = dbl.normal2_double();
    double c = 0, e = 0;
    box_muller_double(x[0], x[1], x[2], x[3], c, e);
    EXPECT_EQ(d[0], c);
    EXPECT_EQ(d[1], e);
  }
}

// ---- conversions ------------------------------------------------------------------------------

TEST(RandomDist, UniformNeverReachesOne) {
  EXPECT_EQ(uniform_float(0), 0.0f);
  EXPECT_EQ(uniform_float(0xffffffffu), 1.0f - 0x1p-24f);
  EXPECT_LT(uniform_float(0xffffffffu), 1.0f);
  EXPECT_EQ(uniform_double(0, 0), 0.0);
  EXPECT_EQ(uniform_double(0xffffffffu, 0xffffffffu), 1.0 - 0x1p-53);
  EXPECT_EQ(uniform_double(0x80000000u, 0), 0.5);
}

TEST(RandomDist, BoundedStaysInRange) {
  EXPECT_EQ(bounded_u64(0xffffffffu, 0xffffffffu, 1), 0u);
  EXPECT_EQ(bounded_u64(0xffffffffu, 0xffffffffu, 10), 9u);
  EXPECT_EQ(bounded_u64(0, 0, 10), 0u);
  EXPECT_EQ(bounded_u64(0x80000000u, 0, 10), 5u);
  EXPECT_EQ(bounded_u64(0xffffffffu, 0xffffffffu, ~uint64_t{0}), ~uint64_t{0} - 1);
}

// ---- generator --------------------------------------------------------------------------------

TEST(Generator, ReserveAdvancesAndSeedResets) {
  Generator& g = Generator::global();
  g.set_seed(123);
  PhiloxState a = g.reserve(10);
  PhiloxState b = g.reserve(3);
  EXPECT_EQ(a.seed, 123u);
  EXPECT_EQ(a.offset, 0u);
  EXPECT_EQ(b.offset, 10u);
  EXPECT_EQ(g.offset(), 13u);
  manual_seed(77);
  EXPECT_EQ(g.seed(), 77u);
  EXPECT_EQ(g.offset(), 0u);
}

TEST(Generator, RandomOpsReserveWholeBlocks) {
  manual_seed(1);
  rand({9});  // float32: 4 per block -> 3 blocks
  EXPECT_EQ(Generator::global().offset(), 3u);
  rand({3}, {.dtype = kFloat64});  // float64: 2 per block -> 2 blocks
  EXPECT_EQ(Generator::global().offset(), 5u);
  randint(0, 5, {4});  // 2 per block
  EXPECT_EQ(Generator::global().offset(), 7u);
  randn({0});
  EXPECT_EQ(Generator::global().offset(), 7u);
}

// ---- random factories -------------------------------------------------------------------------

TEST(Rand, ElementMappingIsDocumented) {
  manual_seed(2024);
  rand({5});  // moves the offset to 2 blocks
  Tensor f = rand({10});
  Tensor d = rand({5}, {.dtype = kFloat64});
  std::vector<float> fv = f.to_vector<float>();
  for (size_t i = 0; i < fv.size(); ++i) {
    EXPECT_EQ(fv[i], uniform_float(philox_block(2024, 2 + i / 4)[i % 4])) << "element " << i;
  }
  std::vector<double> dv = d.to_vector<double>();
  for (size_t i = 0; i < dv.size(); ++i) {
    const PhiloxCounter w = philox_block(2024, 5 + i / 2);
    EXPECT_EQ(dv[i], uniform_double(w[2 * (i % 2)], w[2 * (i % 2) + 1])) << "element " << i;
  }
}

TEST(Rand, ShapesDtypesDevices) {
  Tensor a = rand({2, 3});
  EXPECT_EQ(a.sizes(), (Shape{2, 3}));
  EXPECT_EQ(a.dtype(), kFloat32);
  EXPECT_TRUE(a.is_cpu());
  EXPECT_TRUE(a.is_contiguous());
  Tensor b = randn({4}, {.dtype = kFloat64, .requires_grad = true});
  EXPECT_EQ(b.dtype(), kFloat64);
  EXPECT_TRUE(b.requires_grad());
  EXPECT_TRUE(b.is_leaf());
  EXPECT_EQ(rand({}).dim(), 0);
  EXPECT_EQ(rand({0, 3}).numel(), 0);
}

TEST(Rand, RejectsIntegerDtypes) {
  EXPECT_THROW_MSG(rand({2}, {.dtype = kInt64}), "[rand] expected a floating dtype, got int64");
  EXPECT_THROW_MSG(randn({2}, {.dtype = kInt32}), "[randn] expected a floating dtype, got int32");
  EXPECT_THROW_MSG(rand({2, -1}), "[rand] trying to create a tensor with negative dimension -1: sizes [2, -1]");
}

TEST(Rand, ReproducibleAfterManualSeed) {
  manual_seed(99);
  std::vector<float> a = rand({37}).to_vector<float>();
  std::vector<double> an = randn({11}, {.dtype = kFloat64}).to_vector<double>();
  manual_seed(99);
  std::vector<float> b = rand({37}).to_vector<float>();
  std::vector<double> bn = randn({11}, {.dtype = kFloat64}).to_vector<double>();
  EXPECT_EQ(a, b);
  EXPECT_EQ(an, bn);
  manual_seed(100);
  EXPECT_NE(rand({37}).to_vector<float>(), a);
}

TEST(Rand, SuccessiveCallsDiffer) {
  manual_seed(5);
  std::vector<float> a = rand({16}).to_vector<float>();
  std::vector<float> b = rand({16}).to_vector<float>();
  EXPECT_NE(a, b);
  std::set<float> distinct(a.begin(), a.end());
  distinct.insert(b.begin(), b.end());
  EXPECT_EQ(distinct.size(), 32u);
}

TEST(Rand, SameOpObjectReplaysSameNumbers) {
  manual_seed(31);
  CaptureOps capture;
  Tensor first;
  {
    OpObserverGuard guard(&capture);
    first = randn({10});
  }
  ASSERT_EQ(capture.ops.size(), 1u);
  const OpPtr op = capture.ops[0];
  EXPECT_EQ(op->name(), "randn");
  EXPECT_TRUE(op->has(kFactory));
  EXPECT_TRUE(op->has(kRandom));
  EXPECT_EQ(op->attrs(), "size=[10], dtype=float32, device=cpu, seed=31, offset=0");
  rand({100});  // the generator moves on; the op keeps its own state
  Tensor again = dispatch1(op, {});
  EXPECT_EQ(again.to_vector<float>(), first.to_vector<float>());
}

TEST(Rand, UniformStatistics) {
  manual_seed(8);
  for (DType dt : {kFloat32, kFloat64}) {
    std::vector<double> v = rand({100000}, {.dtype = dt}).to_vector<double>();
    double lo = 1, hi = 0;
    for (double x : v) {
      lo = std::min(lo, x);
      hi = std::max(hi, x);
    }
    EXPECT_GE(lo, 0.0);
    EXPECT_LT(hi, 1.0);
    EXPECT_LT(lo, 1e-3);
    EXPECT_GT(hi, 1 - 1e-3);
    // Standard errors: mean 0.29 / sqrt(n) ~ 9e-4, std ~ 6e-4.
    EXPECT_NEAR(mean_of(v), 0.5, 5e-3) << dtype_name(dt);
    EXPECT_NEAR(std_of(v), std::sqrt(1.0 / 12.0), 3e-3) << dtype_name(dt);
  }
}

TEST(Randn, NormalStatistics) {
  manual_seed(9);
  for (DType dt : {kFloat32, kFloat64}) {
    std::vector<double> v = randn({100001}, {.dtype = dt}).to_vector<double>();
    EXPECT_NEAR(mean_of(v), 0.0, 0.015) << dtype_name(dt);
    EXPECT_NEAR(std_of(v), 1.0, 0.015) << dtype_name(dt);
    int64_t within_one = 0;
    for (double x : v) {
      EXPECT_TRUE(std::isfinite(x));
      within_one += std::abs(x) < 1.0;
    }
    EXPECT_NEAR(static_cast<double>(within_one) / static_cast<double>(v.size()), 0.6827, 0.01);
  }
}

TEST(Randint, RangeAndUniformity) {
  manual_seed(10);
  Tensor t = randint(-3, 4, {70000});
  EXPECT_EQ(t.dtype(), kInt64);
  std::vector<int64_t> v = t.to_vector<int64_t>();
  std::vector<int64_t> counts(7, 0);
  for (int64_t x : v) {
    ASSERT_GE(x, -3);
    ASSERT_LT(x, 4);
    ++counts[static_cast<size_t>(x + 3)];
  }
  for (int64_t c : counts) EXPECT_NEAR(static_cast<double>(c), 10000.0, 500.0);
}

TEST(Randint, DtypesAndWideRanges) {
  manual_seed(11);
  std::vector<int32_t> a = randint(0, 2000000000, {1000}, {.dtype = kInt32}).to_vector<int32_t>();
  bool large = false;
  for (int32_t x : a) {
    EXPECT_GE(x, 0);
    EXPECT_LT(x, 2000000000);
    large |= x > 1000000000;
  }
  EXPECT_TRUE(large);
  std::vector<int64_t> b = randint(INT64_MIN, INT64_MAX, {1000}).to_vector<int64_t>();
  bool neg = false, pos = false;
  for (int64_t x : b) {
    neg |= x < -(int64_t{1} << 62);
    pos |= x > (int64_t{1} << 62);
  }
  EXPECT_TRUE(neg && pos);
  std::vector<double> f = randint(5, 8, {100}, {.dtype = kFloat64}).to_vector<double>();
  for (double x : f) EXPECT_TRUE(x == 5 || x == 6 || x == 7);
  std::vector<bool> flags = randint(0, 2, {100}, {.dtype = kBool}).to_vector<bool>();
  EXPECT_NE(std::count(flags.begin(), flags.end(), true), 0);
  EXPECT_NE(std::count(flags.begin(), flags.end(), false), 0);
}

TEST(Randint, Errors) {
  EXPECT_THROW_MSG(randint(5, 5, {2}), "[randint] expected low < high, got low=5, high=5");
  EXPECT_THROW_MSG(randint(0, int64_t{1} << 40, {2}, {.dtype = kInt32}),
                   "[randint] bounds [0, 1099511627776) do not fit in int32");
  EXPECT_THROW_MSG(randint(0, 3, {2}, {.dtype = kBool}), "do not fit in bool");
  EXPECT_THROW_MSG(randint(0, 3, {-2}), "negative dimension -2");
}

TEST(Random, LikeForms) {
  Tensor base = zeros({3, 2}, {.dtype = kFloat64});
  Tensor r = rand_like(base);
  EXPECT_EQ(r.sizes(), (Shape{3, 2}));
  EXPECT_EQ(r.dtype(), kFloat64);
  EXPECT_EQ(randn_like(base).dtype(), kFloat64);
  Tensor i = randint_like(zeros({5}, {.dtype = kInt32}), 1, 3);
  EXPECT_EQ(i.dtype(), kInt32);
  for (int32_t x : i.to_vector<int32_t>()) EXPECT_TRUE(x == 1 || x == 2);
  EXPECT_THROW_MSG(rand_like(zeros({2}, {.dtype = kInt64})), "[rand] expected a floating dtype, got int64");
}

TEST(Random, MetaDeviceHasNoDataButReservesOffsets) {
  manual_seed(12);
  Tensor m = randn({1000}, {.device = kMeta});
  EXPECT_TRUE(m.is_meta());
  EXPECT_EQ(m.sizes(), (Shape{1000}));
  EXPECT_THROW_MSG(m.raw_data(), "[data_ptr]");
  EXPECT_EQ(Generator::global().offset(), 250u);
}

// ---- CPU and CUDA draw the same numbers -------------------------------------------------------

TEST(RandomCuda, SameDrawsAsCpu) {
  TG_REQUIRE_CUDA();
  for (int64_t n : {1, 5, 1000, 4099, 100003}) {
    for (DType dt : {kFloat32, kFloat64}) {
      manual_seed(21);
      Tensor cpu = rand({n}, {.dtype = dt});
      manual_seed(21);
      Tensor gpu = rand({n}, {.dtype = dt, .device = cuda_device()});
      EXPECT_TRUE(gpu.is_cuda());
      EXPECT_EQ(gpu.to_vector<double>(), cpu.to_vector<double>()) << "rand " << dtype_name(dt) << " n=" << n;
      manual_seed(22);
      Tensor ncpu = randn({n}, {.dtype = dt});
      manual_seed(22);
      Tensor ngpu = randn({n}, {.dtype = dt, .device = cuda_device()});
      testing::expect_close(ngpu, ncpu, 1e-5, 1e-5);
    }
    for (DType dt : {kInt32, kInt64, kFloat32}) {
      manual_seed(23);
      Tensor cpu = randint(-1000, 1000, {n}, {.dtype = dt});
      manual_seed(23);
      Tensor gpu = randint(-1000, 1000, {n}, {.dtype = dt, .device = cuda_device()});
      EXPECT_EQ(gpu.to_vector<double>(), cpu.to_vector<double>()) << "randint " << dtype_name(dt) << " n=" << n;
    }
  }
  manual_seed(24);
  Tensor wide_cpu = randint(INT64_MIN, INT64_MAX, {777});
  manual_seed(24);
  Tensor wide_gpu = randint(INT64_MIN, INT64_MAX, {777}, {.dtype = kInt64, .device = cuda_device()});
  EXPECT_EQ(wide_gpu.to_vector<int64_t>(), wide_cpu.to_vector<int64_t>());
}

TEST(RandomCuda, ReplayOnDeviceReproduces) {
  TG_REQUIRE_CUDA();
  manual_seed(25);
  CaptureOps capture;
  Tensor first;
  {
    OpObserverGuard guard(&capture);
    first = rand({4096}, {.device = cuda_device()});
  }
  ASSERT_EQ(capture.ops.size(), 1u);
  Tensor again = dispatch1(capture.ops[0], {});
  EXPECT_EQ(again.to_vector<float>(), first.to_vector<float>());
}

}  // namespace
}  // namespace tg
