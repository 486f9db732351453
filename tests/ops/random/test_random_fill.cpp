// The host random fills (batched Philox words, split over threads above a size threshold) against
// the element-by-element definition of ops/random/random_dist.h; the in-place fills against the
// factories; and the generator offsets both leave behind.
#include <cstdint>
#include <cstring>
#include <vector>

#include "ops/core/dispatch.h"
#include "ops/random/cpu/philox_fill.h"
#include "ops/random/philox.h"
#include "ops/random/random.h"
#include "ops/random/random_dist.h"
#include "ops/random/random_fill.h"
#include "support/test_support.h"

namespace tg {
namespace {

constexpr int64_t kGrain = cpu::kRandomFillGrain;

// Sizes around batch edges (32 blocks), the threading threshold (two grains), odd, and large.
const std::vector<int64_t>& fill_sizes() {
  static const std::vector<int64_t> sizes{1,          3,         5,         63,        64,         65,
                                          127,        128,       129,       4097,      2 * kGrain - 1, 2 * kGrain,
                                          2 * kGrain + 1, 5 * kGrain + 3, 1000003};
  return sizes;
}

// Start offsets: zero, odd, and just below a carry from the counter's low word into its high word.
const std::vector<uint64_t>& start_offsets() {
  static const std::vector<uint64_t> offsets{0, 7, (uint64_t{1} << 32) - 5};
  return offsets;
}

// True when a and b have the same sizes, dtype and bytes.
bool same_bits(const Tensor& a, const Tensor& b) {
  if (a.sizes() != b.sizes() || a.dtype() != b.dtype()) return false;
  const Tensor x = a.contiguous(), y = b.contiguous();
  return std::memcmp(x.raw_data(), y.raw_data(), static_cast<size_t>(x.numel()) * dtype_size(x.dtype())) == 0;
}

// Expects element i of `got` to be Block applied to block offset + i / kPerBlock, word for word.
template <typename T, typename Block>
void expect_element_definition(const std::vector<T>& got, PhiloxState state, const Block& block) {
  constexpr int64_t per = Block::kPerBlock;
  int64_t mismatches = 0;
  for (int64_t i = 0; i < static_cast<int64_t>(got.size()); ++i) {
    const PhiloxCounter r = philox_block(state.seed, state.offset + static_cast<uint64_t>(i / per));
    const uint32_t w[4] = {r[0], r[1], r[2], r[3]};
    T v[4];
    block(w, v);
    if (std::memcmp(&got[static_cast<size_t>(i)], &v[i % per], sizeof(T)) != 0 && ++mismatches <= 3)
      ADD_FAILURE() << "element " << i << " of " << got.size() << " (offset " << state.offset << ")";
  }
  EXPECT_EQ(mismatches, 0);
}

TEST(RandomFill, FactoriesMatchTheElementDefinitionAcrossSizesAndOffsets) {
  for (uint64_t offset : start_offsets()) {
    for (int64_t n : fill_sizes()) {
      SCOPED_TRACE(::testing::Message() << "n=" << n << " offset=" << offset);
      const PhiloxState s{91, offset};
      Generator::global().set_state(s);
      const Tensor u = rand({n});
      const PhiloxState s2 = Generator::global().state();
      EXPECT_EQ(s2.offset, offset + static_cast<uint64_t>((n + 3) / 4));
      const Tensor z = randn({n});
      const PhiloxState s3 = Generator::global().state();
      const Tensor d = randn({n}, {.dtype = kFloat64});
      const PhiloxState s4 = Generator::global().state();
      EXPECT_EQ(s4.offset, s3.offset + static_cast<uint64_t>((n + 1) / 2));
      const Tensor k = randint(-7, 1000, {n});
      expect_element_definition(u.to_vector<float>(), s, UniformBlock<float>{});
      expect_element_definition(z.to_vector<float>(), s2, NormalBlock<float>{});
      expect_element_definition(d.to_vector<double>(), s3, NormalBlock<double>{});
      expect_element_definition(k.to_vector<int64_t>(), s4, RandintBlock<int64_t>{-7, 1007});
    }
  }
}

TEST(RandomFill, KernelWritesExactlyTheElementsAskedFor) {
  // Sentinels after the end stay untouched, for partial last blocks and batches alike.
  for (int64_t n : fill_sizes()) {
    std::vector<float> out(static_cast<size_t>(n) + 5, -1.0f);
    cpu::philox_fill(out.data(), n, PhiloxState{5, 3}, NormalBlock<float>{});
    for (size_t i = static_cast<size_t>(n); i < out.size(); ++i) EXPECT_EQ(out[i], -1.0f) << "n=" << n;
    out.resize(static_cast<size_t>(n));
    expect_element_definition(out, PhiloxState{5, 3}, NormalBlock<float>{});
  }
}

TEST(RandomFill, InPlaceFillsDrawWhatTheFactoriesDraw) {
  for (DType dtype : {kFloat32, kFloat64, kFloat16, kBFloat16}) {
    for (int64_t n : {int64_t{5}, 2 * kGrain + 1}) {
      SCOPED_TRACE(::testing::Message() << dtype_name(dtype) << " n=" << n);
      manual_seed(17);
      const Tensor u = rand({n}, {.dtype = dtype}), z = randn({n}, {.dtype = dtype});
      const uint64_t offset = Generator::global().offset();
      manual_seed(17);
      Tensor a = empty({n}, {.dtype = dtype}), b = empty({n}, {.dtype = dtype});
      fill_rand_(a);
      fill_randn_(b);
      EXPECT_TRUE(same_bits(a, u));
      EXPECT_TRUE(same_bits(b, z));
      EXPECT_EQ(Generator::global().offset(), offset);
    }
  }
}

TEST(RandomFill, StridedTargetsGetTheFactoryValuesElementForElement) {
  manual_seed(4);
  const Tensor z = randn({301, 7});
  manual_seed(4);
  Tensor t = empty({7, 301}).t();  // [301, 7], not contiguous
  fill_randn_(t);
  EXPECT_TRUE(same_bits(t, z));
}

// Records every op dispatched while it is installed.
struct CaptureOps : OpObserver {
  void before_op(const OpPtr&, TensorList&) override {}
  bool wants_fake_outputs(const OpPtr&, const TensorList&) override { return false; }
  std::vector<OpPtr> ops;
  void on_op(const OpPtr& op, const TensorList&, const TensorList&) override { ops.push_back(op); }
};

TEST(RandomFill, SameOpObjectReplaysSameNumbers) {
  // The op keeps the state it reserved: a tape or a trace running it again writes the same values.
  manual_seed(8);
  CaptureOps capture;
  Tensor t = empty({1000});
  {
    OpObserverGuard guard(&capture);
    fill_randn_(t);
  }
  ASSERT_EQ(capture.ops.size(), 1u);
  const OpPtr op = capture.ops[0];
  EXPECT_EQ(op->name(), "fill_randn_");
  EXPECT_TRUE(op->has(kRandom));
  EXPECT_TRUE(op->has(kInPlace));
  EXPECT_EQ(op->attrs(), "seed=8, offset=0");
  const Tensor first = t.clone();
  rand({100});  // the generator moves on; the op keeps its own state
  t.zero_();
  dispatch1(op, {t});
  EXPECT_TRUE(same_bits(t, first));
  // A fresh draw of the op reserves new blocks.
  EXPECT_EQ(op->redraw()->attrs(), "seed=8, offset=275");
}

TEST(RandomFill, RejectsIntegerTargets) {
  Tensor i = empty({3}, {.dtype = kInt64});
  EXPECT_THROW_MSG(fill_rand_(i), "[fill_rand_] expected a floating dtype, got int64");
  EXPECT_THROW_MSG(skip_random_draws(4, kInt32), "[skip_random_draws] expected a floating dtype, got int32");
}

TEST(RandomFill, DrawsAfterALargeFillContinueTheSeededStream) {
  // A threaded fill reserves exactly its blocks: a manual_seed'd generator's next draws follow on.
  const int64_t n = 4 * kGrain + 3;  // 262147 floats: 65537 blocks
  manual_seed(2025);
  randn({n});
  EXPECT_EQ(Generator::global().offset(), 65537u);
  const Tensor next = rand({9});
  EXPECT_EQ(Generator::global().offset(), 65540u);
  expect_element_definition(next.to_vector<float>(), PhiloxState{2025, 65537}, UniformBlock<float>{});
}

TEST(RandomFill, SkippedDrawsAdvanceTheGeneratorAsTheDrawWould) {
  for (DType dtype : {kFloat32, kFloat64, kFloat16}) {
    manual_seed(3);
    randn({1001}, {.dtype = dtype});
    const Tensor drawn_next = rand({7});
    manual_seed(3);
    skip_random_draws(1001, dtype);
    const Tensor skipped_next = rand({7});
    EXPECT_TRUE(same_bits(drawn_next, skipped_next)) << dtype_name(dtype);
  }
}

}  // namespace
}  // namespace tg
