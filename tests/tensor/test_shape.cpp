// Shape, the sizes-or-strides vector: elements kept in place up to its inline capacity and on the
// heap beyond it, the vector operations the library uses, copies and moves in both storages, and
// conversions to and from std::vector<int64_t>.
#include <gtest/gtest.h>

#include <map>
#include <numeric>
#include <utility>
#include <vector>

#include "tensor/shape.h"

namespace tg {
namespace {

// 0, 1, ..., n-1.
Shape iota_shape(size_t n) {
  Shape s(n);
  std::iota(s.begin(), s.end(), int64_t{0});
  return s;
}

std::vector<int64_t> iota_vector(size_t n) {
  std::vector<int64_t> v(n);
  std::iota(v.begin(), v.end(), int64_t{0});
  return v;
}

// Lengths on both sides of the inline capacity.
const std::vector<size_t> kLengths = {0, 1, Shape::kInlineCapacity - 1, Shape::kInlineCapacity,
                                      Shape::kInlineCapacity + 1, 3 * Shape::kInlineCapacity};

TEST(Shape, ConstructsLikeAVector) {
  EXPECT_TRUE(Shape().empty());
  EXPECT_EQ(Shape(3, 7), (std::vector<int64_t>{7, 7, 7}));
  EXPECT_EQ(Shape(2), (std::vector<int64_t>{0, 0}));
  EXPECT_EQ((Shape{4, 5}), (std::vector<int64_t>{4, 5}));
  const std::vector<int> ints = {1, 2, 3};
  EXPECT_EQ(Shape(ints.begin(), ints.end()), (std::vector<int64_t>{1, 2, 3}));
  for (size_t n : kLengths) {
    const Shape from_vector = iota_vector(n);
    EXPECT_EQ(from_vector, iota_vector(n)) << n << " elements";
    const std::vector<int64_t> back = iota_shape(n);
    EXPECT_EQ(back, iota_vector(n)) << n << " elements";
    EXPECT_EQ(iota_shape(n).vec(), iota_vector(n)) << n << " elements";
  }
}

TEST(Shape, PushBackGrowsPastTheInlineCapacity) {
  Shape s;
  std::vector<int64_t> expected;
  for (int64_t i = 0; i < 40; ++i) {
    s.push_back(i * 3);
    expected.push_back(i * 3);
    ASSERT_EQ(s, expected) << i;
    ASSERT_GE(s.capacity(), s.size());
  }
  s.pop_back();
  expected.pop_back();
  EXPECT_EQ(s, expected);
  EXPECT_EQ(s.front(), 0);
  EXPECT_EQ(s.back(), 38 * 3);
}

TEST(Shape, CopiesAndMovesKeepTheElementsInEitherStorage) {
  for (size_t n : kLengths) {
    const Shape original = iota_shape(n);
    Shape copy = original;
    EXPECT_EQ(copy, original) << n;
    copy.push_back(99);  // the copy owns its elements
    EXPECT_EQ(original, iota_shape(n)) << n;

    Shape moved = std::move(copy);
    EXPECT_EQ(moved.size(), n + 1) << n;
    EXPECT_EQ(moved.back(), 99) << n;
    EXPECT_TRUE(copy.empty()) << n;  // NOLINT: a moved-from shape is empty and usable
    copy.push_back(5);
    EXPECT_EQ(copy, (Shape{5})) << n;

    Shape assigned(2, 1);
    assigned = original;
    EXPECT_EQ(assigned, original) << n;
    Shape move_assigned = iota_shape(3 * Shape::kInlineCapacity);
    move_assigned = std::move(assigned);
    EXPECT_EQ(move_assigned, original) << n;
    move_assigned = move_assigned;  // NOLINT: self-assignment keeps the elements
    EXPECT_EQ(move_assigned, original) << n;
  }
}

TEST(Shape, SwapExchangesInlineAndHeapElements) {
  Shape small = iota_shape(2), large = iota_shape(3 * Shape::kInlineCapacity);
  small.swap(large);
  EXPECT_EQ(small, iota_shape(3 * Shape::kInlineCapacity));
  EXPECT_EQ(large, iota_shape(2));
}

TEST(Shape, InsertAndEraseMatchAVector) {
  for (size_t n : kLengths) {
    for (size_t at = 0; at <= n; ++at) {
      Shape s = iota_shape(n);
      std::vector<int64_t> v = iota_vector(n);
      s.insert(s.begin() + at, 100);
      v.insert(v.begin() + static_cast<std::ptrdiff_t>(at), 100);
      ASSERT_EQ(s, v) << "insert one at " << at << " of " << n;
      s.insert(s.begin() + at, 2, -1);
      v.insert(v.begin() + static_cast<std::ptrdiff_t>(at), 2, -1);
      ASSERT_EQ(s, v) << "insert two at " << at << " of " << n;
      s.insert(s.begin() + at, {7, 8, 9});
      v.insert(v.begin() + static_cast<std::ptrdiff_t>(at), {7, 8, 9});
      ASSERT_EQ(s, v) << "insert a list at " << at << " of " << n;
      s.erase(s.begin() + at, s.begin() + at + 3);
      v.erase(v.begin() + static_cast<std::ptrdiff_t>(at), v.begin() + static_cast<std::ptrdiff_t>(at) + 3);
      ASSERT_EQ(s, v) << "erase three at " << at << " of " << n;
      s.erase(s.begin() + at);
      v.erase(v.begin() + static_cast<std::ptrdiff_t>(at));
      ASSERT_EQ(s, v) << "erase one at " << at << " of " << n;
    }
  }
}

TEST(Shape, InsertingItsOwnElementsCopiesThemFirst) {
  Shape s = iota_shape(Shape::kInlineCapacity);
  s.insert(s.begin() + 1, s.begin(), s.end());  // grows to the heap while reading itself
  std::vector<int64_t> v = iota_vector(Shape::kInlineCapacity);
  const std::vector<int64_t> values = v;
  v.insert(v.begin() + 1, values.begin(), values.end());
  EXPECT_EQ(s, v);
}

TEST(Shape, ResizeAssignAndClear) {
  Shape s = iota_shape(3);
  s.resize(10, 4);
  EXPECT_EQ(s, (std::vector<int64_t>{0, 1, 2, 4, 4, 4, 4, 4, 4, 4}));
  s.resize(2);
  EXPECT_EQ(s, (Shape{0, 1}));
  s.assign(3, 9);
  EXPECT_EQ(s, (Shape{9, 9, 9}));
  const std::vector<int64_t> v = iota_vector(12);
  s.assign(v.begin(), v.end());
  EXPECT_EQ(s, v);
  s.clear();
  EXPECT_TRUE(s.empty());
  s = {1, 2};
  EXPECT_EQ(s, (Shape{1, 2}));
}

TEST(Shape, ComparesAndOrdersLexicographically) {
  EXPECT_EQ((Shape{1, 2}), (Shape{1, 2}));
  EXPECT_NE((Shape{1, 2}), (Shape{1, 2, 0}));
  EXPECT_NE((Shape{1, 2}), (Shape{2, 1}));
  EXPECT_LT((Shape{1, 2}), (Shape{1, 3}));
  EXPECT_LT((Shape{1, 2}), (Shape{1, 2, 0}));
  EXPECT_LT(Shape(), (Shape{0}));
  EXPECT_TRUE((std::vector<int64_t>{3, 4}) == (Shape{3, 4}));
  std::map<Shape, int> by_shape = {{Shape{2, 3}, 1}, {Shape{2}, 2}};
  EXPECT_EQ(by_shape.at(Shape{2, 3}), 1);
  EXPECT_EQ(by_shape.begin()->second, 2);
}

TEST(Shape, ReverseIterationAndRangeFor) {
  const Shape s = iota_shape(9);
  const std::vector<int64_t> reversed(s.rbegin(), s.rend());
  EXPECT_EQ(reversed, (std::vector<int64_t>{8, 7, 6, 5, 4, 3, 2, 1, 0}));
  int64_t sum = 0;
  for (int64_t v : s) sum += v;
  EXPECT_EQ(sum, 36);
}

}  // namespace
}  // namespace tg
