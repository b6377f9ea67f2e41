// A bounded queue many threads push to and pop from without a lock: each cell carries a sequence
// number that says whose turn it is (a producer's at pos, a consumer's at pos + 1), and a position
// is taken by one compare-exchange. A thread stopped between taking a cell and filling it delays
// only whoever wants that cell. Used where the library's launch path hands something to its
// completion thread (markers to poll, events to reuse).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

namespace concord::intercept {

template <typename T>
class BoundedQueue {
 public:
  // `capacity`: a power of two.
  explicit BoundedQueue(size_t capacity) : cells_(std::make_unique<Cell[]>(capacity)), mask_(capacity - 1) {
    for (size_t i = 0; i < capacity; ++i) cells_[i].seq.store(i, std::memory_order_relaxed);
  }
  // False when full.
  bool push(const T& value) {
    size_t pos = enqueue_.load(std::memory_order_relaxed);
    for (;;) {
      Cell& c = cells_[pos & mask_];
      const size_t seq = c.seq.load(std::memory_order_acquire);
      const auto diff = static_cast<intptr_t>(seq) - static_cast<intptr_t>(pos);
      if (diff == 0) {
        if (enqueue_.compare_exchange_weak(pos, pos + 1, std::memory_order_relaxed)) {
          c.value = value;
          c.seq.store(pos + 1, std::memory_order_release);
          return true;
        }
      } else if (diff < 0) {
        return false;
      } else {
        pos = enqueue_.load(std::memory_order_relaxed);
      }
    }
  }
  // False when empty.
  bool pop(T& out) {
    size_t pos = dequeue_.load(std::memory_order_relaxed);
    for (;;) {
      Cell& c = cells_[pos & mask_];
      const size_t seq = c.seq.load(std::memory_order_acquire);
      const auto diff = static_cast<intptr_t>(seq) - static_cast<intptr_t>(pos + 1);
      if (diff == 0) {
        if (dequeue_.compare_exchange_weak(pos, pos + 1, std::memory_order_relaxed)) {
          out = c.value;
          c.seq.store(pos + mask_ + 1, std::memory_order_release);
          return true;
        }
      } else if (diff < 0) {
        return false;
      } else {
        pos = dequeue_.load(std::memory_order_relaxed);
      }
    }
  }
  bool empty() const { return enqueue_.load(std::memory_order_acquire) == dequeue_.load(std::memory_order_acquire); }

 private:
  struct Cell {
    std::atomic<size_t> seq{0};
    T value{};
  };
  std::unique_ptr<Cell[]> cells_;
  size_t mask_;
  alignas(64) std::atomic<size_t> enqueue_{0};
  alignas(64) std::atomic<size_t> dequeue_{0};
};

}  // namespace concord::intercept
