// cpu::parallel_for: every index once, ranges of at least a grain, small and nested loops on the
// calling thread, and exceptions carried back to the caller.
#include <atomic>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include "ops/core/cpu/parallel_for.h"
#include "support/test_support.h"

namespace tg {
namespace {

TEST(ParallelFor, CoversEveryIndexExactlyOnce) {
  for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{7}, int64_t{1000}, int64_t{100003}}) {
    for (int64_t grain : {int64_t{1}, int64_t{3}, int64_t{64}, int64_t{1} << 20}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      std::mutex m;
      std::vector<std::pair<int64_t, int64_t>> ranges;
      cpu::parallel_for(n, grain, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) hits[static_cast<size_t>(i)]++;
        std::lock_guard<std::mutex> lock(m);
        ranges.emplace_back(begin, end);
      });
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1) << "n=" << n << " i=" << i;
      EXPECT_LE(static_cast<int>(ranges.size()), std::max(1, cpu::parallel_for_threads()));
      if (ranges.size() > 1)
        for (const auto& [begin, end] : ranges) EXPECT_GE(end - begin, grain) << "n=" << n;
    }
  }
}

TEST(ParallelFor, SmallAndNestedLoopsRunOnTheCaller) {
  EXPECT_GE(cpu::parallel_for_threads(), 1);
  const std::thread::id caller = std::this_thread::get_id();
  cpu::parallel_for(99, 50, [&](int64_t begin, int64_t end) {  // below two grains
    EXPECT_EQ(std::this_thread::get_id(), caller);
    EXPECT_EQ(begin, 0);
    EXPECT_EQ(end, 99);
  });
  std::atomic<int> nested_ranges{0};
  cpu::parallel_for(1000, 1, [&](int64_t, int64_t) {
    const std::thread::id outer = std::this_thread::get_id();
    cpu::parallel_for(1000, 1, [&](int64_t begin, int64_t end) {
      EXPECT_EQ(std::this_thread::get_id(), outer);
      EXPECT_EQ(end - begin, 1000);
      ++nested_ranges;
    });
  });
  EXPECT_EQ(nested_ranges.load(), std::min(1000, cpu::parallel_for_threads()));
}

TEST(ParallelFor, RethrowsAnExceptionFromAnyRange) {
  EXPECT_THROW(cpu::parallel_for(1000, 1, [](int64_t, int64_t end) {
                 if (end == 1000) throw std::runtime_error("last range");
               }),
               std::runtime_error);
  // The caller's thread is usable for parallel loops afterwards.
  std::atomic<int64_t> sum{0};
  cpu::parallel_for(1000, 1, [&](int64_t begin, int64_t end) { sum += end - begin; });
  EXPECT_EQ(sum.load(), 1000);
}

}  // namespace
}  // namespace tg
