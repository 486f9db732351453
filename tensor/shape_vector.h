// Shape: the sizes or strides of a tensor, a vector of int64_t that keeps up to six elements in
// place, so that describing a tensor (and every op's output) costs no heap allocation. It converts
// to and from std::vector<int64_t> and offers the part of its interface the library uses.
#pragma once

#include <algorithm>
#include <compare>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <iterator>
#include <new>
#include <type_traits>
#include <vector>

namespace tg {

// Sizes or strides of a tensor, outermost dimension first.
class Shape {
 public:
  using value_type = int64_t;
  using size_type = size_t;
  using difference_type = std::ptrdiff_t;
  using reference = int64_t&;
  using const_reference = const int64_t&;
  using pointer = int64_t*;
  using const_pointer = const int64_t*;
  using iterator = int64_t*;
  using const_iterator = const int64_t*;
  using reverse_iterator = std::reverse_iterator<iterator>;
  using const_reverse_iterator = std::reverse_iterator<const_iterator>;

  // Elements kept in place; longer shapes move to the heap.
  static constexpr size_t kInlineCapacity = 6;

  Shape() noexcept = default;
  // `n` copies of `value`.
  explicit Shape(size_t n, int64_t value = 0) { assign(n, value); }
  Shape(std::initializer_list<int64_t> values) { assign(values.begin(), values.end()); }
  template <typename It>
    requires(!std::is_integral_v<It>)
  Shape(It first, It last) {
    assign(first, last);
  }
  Shape(const std::vector<int64_t>& values) { assign(values.begin(), values.end()); }  // NOLINT: implicit
  Shape(const Shape& other) { assign(other.begin(), other.end()); }
  Shape(Shape&& other) noexcept { take(other); }
  ~Shape() { release(); }

  Shape& operator=(const Shape& other) {
    if (this != &other) assign(other.begin(), other.end());
    return *this;
  }
  Shape& operator=(Shape&& other) noexcept {
    if (this != &other) {
      release();
      take(other);
    }
    return *this;
  }
  Shape& operator=(std::initializer_list<int64_t> values) {
    assign(values.begin(), values.end());
    return *this;
  }

  // The same elements as a std::vector.
  operator std::vector<int64_t>() const { return std::vector<int64_t>(begin(), end()); }  // NOLINT: implicit
  std::vector<int64_t> vec() const { return std::vector<int64_t>(begin(), end()); }

  size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
  size_t capacity() const noexcept { return capacity_; }
  int64_t* data() noexcept { return data_; }
  const int64_t* data() const noexcept { return data_; }

  int64_t& operator[](size_t i) noexcept { return data_[i]; }
  const int64_t& operator[](size_t i) const noexcept { return data_[i]; }
  int64_t& front() noexcept { return data_[0]; }
  const int64_t& front() const noexcept { return data_[0]; }
  int64_t& back() noexcept { return data_[size_ - 1]; }
  const int64_t& back() const noexcept { return data_[size_ - 1]; }

  iterator begin() noexcept { return data_; }
  iterator end() noexcept { return data_ + size_; }
  const_iterator begin() const noexcept { return data_; }
  const_iterator end() const noexcept { return data_ + size_; }
  const_iterator cbegin() const noexcept { return data_; }
  const_iterator cend() const noexcept { return data_ + size_; }
  reverse_iterator rbegin() noexcept { return reverse_iterator(end()); }
  reverse_iterator rend() noexcept { return reverse_iterator(begin()); }
  const_reverse_iterator rbegin() const noexcept { return const_reverse_iterator(end()); }
  const_reverse_iterator rend() const noexcept { return const_reverse_iterator(begin()); }

  void reserve(size_t n) {
    if (n > capacity_) grow_to(n);
  }
  void clear() noexcept { size_ = 0; }
  void resize(size_t n, int64_t value = 0) {
    reserve(n);
    for (size_t i = size_; i < n; ++i) data_[i] = value;
    size_ = n;
  }
  void push_back(int64_t value) {
    if (size_ == capacity_) grow_to(capacity_ * 2);
    data_[size_++] = value;
  }
  int64_t& emplace_back(int64_t value) {
    push_back(value);
    return back();
  }
  void pop_back() noexcept { --size_; }

  void assign(size_t n, int64_t value) {
    size_ = 0;
    resize(n, value);
  }
  template <typename It>
    requires(!std::is_integral_v<It>)
  void assign(It first, It last) {
    size_ = 0;
    if constexpr (std::is_base_of_v<std::forward_iterator_tag, typename std::iterator_traits<It>::iterator_category>) {
      const auto n = static_cast<size_t>(std::distance(first, last));
      reserve(n);
      std::transform(first, last, data_, [](const auto& v) { return static_cast<int64_t>(v); });
      size_ = n;
    } else {
      for (; first != last; ++first) push_back(static_cast<int64_t>(*first));
    }
  }

  iterator insert(const_iterator pos, int64_t value) { return insert(pos, size_t{1}, value); }
  iterator insert(const_iterator pos, size_t n, int64_t value) {
    const size_t at = index_of(pos);
    open_gap(at, n);
    std::fill(data_ + at, data_ + at + n, value);
    return data_ + at;
  }
  template <typename It>
    requires(!std::is_integral_v<It>)
  iterator insert(const_iterator pos, It first, It last) {
    const size_t at = index_of(pos);
    const Shape values(first, last);  // a copy: the range may lie inside this shape
    open_gap(at, values.size());
    std::copy(values.begin(), values.end(), data_ + at);
    return data_ + at;
  }
  iterator insert(const_iterator pos, std::initializer_list<int64_t> values) {
    return insert(pos, values.begin(), values.end());
  }
  iterator erase(const_iterator pos) { return erase(pos, pos + 1); }
  iterator erase(const_iterator first, const_iterator last) {
    const size_t at = index_of(first), n = static_cast<size_t>(last - first);
    std::copy(data_ + at + n, data_ + size_, data_ + at);
    size_ -= n;
    return data_ + at;
  }

  void swap(Shape& other) noexcept {
    Shape tmp(std::move(other));
    other = std::move(*this);
    *this = std::move(tmp);
  }

  friend bool operator==(const Shape& a, const Shape& b) noexcept {
    return a.size_ == b.size_ && std::equal(a.begin(), a.end(), b.begin());
  }
  friend std::strong_ordering operator<=>(const Shape& a, const Shape& b) noexcept {
    return std::lexicographical_compare_three_way(a.begin(), a.end(), b.begin(), b.end());
  }
  friend bool operator==(const Shape& a, const std::vector<int64_t>& b) noexcept {
    return a.size_ == b.size() && std::equal(a.begin(), a.end(), b.begin());
  }

 private:
  bool on_heap() const noexcept { return data_ != inline_; }
  size_t index_of(const_iterator pos) const noexcept { return static_cast<size_t>(pos - data_); }

  void grow_to(size_t n) {
    n = std::max(n, kInlineCapacity * 2);
    auto* bigger = new int64_t[n];
    std::copy(begin(), end(), bigger);
    release();
    data_ = bigger;
    capacity_ = n;
  }
  // Makes room for `n` elements at index `at`, moving the tail up.
  void open_gap(size_t at, size_t n) {
    reserve(size_ + n);
    std::copy_backward(data_ + at, data_ + size_, data_ + size_ + n);
    size_ += n;
  }
  void release() noexcept {
    if (on_heap()) delete[] data_;
    data_ = inline_;
    capacity_ = kInlineCapacity;
  }
  // Takes other's elements (its heap block, or a copy of its inline ones), leaving it empty.
  void take(Shape& other) noexcept {
    if (other.on_heap()) {
      data_ = other.data_;
      capacity_ = other.capacity_;
      other.data_ = other.inline_;
      other.capacity_ = kInlineCapacity;
    } else {
      std::copy(other.begin(), other.end(), inline_);
    }
    size_ = other.size_;
    other.size_ = 0;
  }

  int64_t* data_ = inline_;
  size_t size_ = 0;
  size_t capacity_ = kInlineCapacity;
  int64_t inline_[kInlineCapacity] = {};  // zeroed: compilers cannot see that only size_ are read
};

}  // namespace tg
