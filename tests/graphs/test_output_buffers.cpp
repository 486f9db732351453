// Memory ranges and the index of CUDA-graph output buffers: the bookkeeping that decides which
// tensors a replay overwrites (device-independent, so it runs on the CPU).
#include <gtest/gtest.h>

#include "graphs/cudagraphs/memory_range.h"
#include "graphs/cudagraphs/output_buffers.h"
#include "support/test_support.h"

namespace tg::graphs {
namespace {

TEST(MemoryRanges, MergeSortsAndJoinsTouchingRanges) {
  const auto merged = merge_ranges({{30, 40}, {0, 10}, {10, 15}, {12, 20}, {50, 50}});
  EXPECT_EQ(merged, (std::vector<MemoryRange>{{0, 20}, {30, 40}}));
}

TEST(MemoryRanges, SubtractCutsHoles) {
  const auto rest = subtract_ranges({{0, 100}, {200, 300}}, {{10, 20}, {90, 210}, {250, 300}});
  EXPECT_EQ(rest, (std::vector<MemoryRange>{{0, 10}, {20, 90}, {210, 250}}));
  EXPECT_TRUE(subtract_ranges({{0, 10}}, {{0, 10}}).empty());
}

TEST(MemoryRanges, OverlapNeedsASharedAddress) {
  EXPECT_TRUE(any_overlap({{0, 10}, {20, 30}}, {{29, 40}}));
  EXPECT_FALSE(any_overlap({{0, 10}, {20, 30}}, {{10, 20}, {30, 35}}));
  EXPECT_FALSE(MemoryRange({0, 10}).overlaps({10, 20}));
}

// A buffer over [begin, end) written in `step`, with one storage handed out (returned to keep it alive).
std::pair<std::shared_ptr<OutputBuffer>, Storage> buffer_at(uintptr_t begin, uintptr_t end, uint64_t step,
                                                              std::shared_ptr<void> memory) {
  auto b = std::make_shared<OutputBuffer>();
  b->range = {begin, end};
  b->label = "forward";
  Storage handed = b->hand_out(memory);
  b->step = step;
  return {b, handed};
}

TEST(OutputBuffers, IndexFindsLiveOverlappingBuffersExceptExcluded) {
  OutputBufferIndex index;
  auto memory = std::make_shared<int>(0);
  auto [a, a_storage] = buffer_at(0x1000, 0x2000, 1, memory);
  auto [b, b_storage] = buffer_at(0x3000, 0x9000, 1, memory);
  auto [c, c_storage] = buffer_at(0xA000, 0xB000, 1, memory);
  for (const auto& buf : {a, b, c}) index.add(buf);
  const auto hits = index.overlapping({{0x1800, 0x3100}}, {});
  EXPECT_EQ(hits.size(), 2u);
  EXPECT_EQ(index.overlapping({{0x8000, 0x8100}}, {}), (std::vector<std::shared_ptr<OutputBuffer>>{b}));
  EXPECT_TRUE(index.overlapping({{0x8000, 0x8100}}, {b}).empty());
  EXPECT_TRUE(index.overlapping({{0x2000, 0x3000}}, {}).empty());
  // A buffer whose tensors all died holds no memory and is nobody's victim.
  c_storage.reset();
  c->handed_out.clear();
  c->owner.reset();
  EXPECT_TRUE(index.overlapping({{0xA000, 0xB000}}, {}).empty());
}

TEST(OutputBuffers, InvalidationMakesHandedOutTensorsRaiseAndReleasesTheMemory) {
  auto memory = std::make_shared<int>(0);
  std::weak_ptr<void> watch = memory;
  auto [b, storage] = buffer_at(0x1000, 0x2000, 3, memory);
  memory.reset();
  EXPECT_TRUE(b->in_use());
  EXPECT_TRUE(b->needed_in(3));
  EXPECT_FALSE(b->needed_in(4));
  b->invalidate();
  EXPECT_TRUE(storage->is_stale());
  EXPECT_TRUE(watch.expired());
  EXPECT_FALSE(b->in_use());
  EXPECT_THROW_MSG(storage->throw_stale(), "mark_step_begin");
}

}  // namespace
}  // namespace tg::graphs
