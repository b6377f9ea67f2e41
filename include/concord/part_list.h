// PartList: the per-part fields of a dispatch (its launches, tenants, ranges...), one entry per
// part and at most two parts (a launch alone, or a fused pair). Stored inline, so dispatching and
// completing a launch allocate nothing for them.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <initializer_list>
#include <stdexcept>
#include <utility>

namespace concord {

inline constexpr size_t kMaxDispatchParts = 2;

template <typename T>
class PartList {
 public:
  using value_type = T;
  using iterator = T*;
  using const_iterator = const T*;

  PartList() = default;
  PartList(std::initializer_list<T> items) {
    for (const T& t : items) push_back(t);
  }

  void push_back(const T& t) {
    if (size_ == kMaxDispatchParts) throw std::length_error("PartList: a dispatch has at most two parts");
    items_[size_++] = t;
  }
  template <typename... Args>
  T& emplace_back(Args&&... args) {
    push_back(T(std::forward<Args>(args)...));
    return items_[size_ - 1];
  }
  void clear() { size_ = 0; }
  void assign(size_t n, const T& value) {
    clear();
    for (size_t i = 0; i < n; ++i) push_back(value);
  }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  T& operator[](size_t i) { return items_[i]; }
  const T& operator[](size_t i) const { return items_[i]; }
  T& at(size_t i) {
    if (i >= size_) throw std::out_of_range("PartList::at");
    return items_[i];
  }
  const T& at(size_t i) const {
    if (i >= size_) throw std::out_of_range("PartList::at");
    return items_[i];
  }
  T& front() { return items_[0]; }
  const T& front() const { return items_[0]; }
  T& back() { return items_[size_ - 1]; }
  const T& back() const { return items_[size_ - 1]; }
  T* begin() { return items_.data(); }
  T* end() { return items_.data() + size_; }
  const T* begin() const { return items_.data(); }
  const T* end() const { return items_.data() + size_; }

  bool operator==(const PartList& o) const { return std::equal(begin(), end(), o.begin(), o.end()); }

 private:
  std::array<T, kMaxDispatchParts> items_{};
  size_t size_ = 0;
};

}  // namespace concord
