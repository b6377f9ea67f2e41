// A word one thread sleeps on and others bump to wake it, through the kernel's futex: no mutex,
// so a launch that wakes the completion thread takes no lock. A waiter passes the value it read
// before its last look; a bump after that look makes the wait return at once, so no wake-up is
// lost.
#pragma once

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>

namespace concord::intercept {

class WakeWord {
 public:
  uint32_t read() const { return word_.load(std::memory_order_acquire); }
  // Sleeps while the word still reads `seen`, up to `timeout` (a signal or a spurious wake-up
  // returns early: the caller looks again).
  void wait(uint32_t seen, std::chrono::nanoseconds timeout) const {
    const timespec ts{static_cast<time_t>(timeout.count() / 1'000'000'000), static_cast<long>(timeout.count() % 1'000'000'000)};
    (void)::syscall(SYS_futex, reinterpret_cast<const uint32_t*>(&word_), FUTEX_WAIT_PRIVATE, seen, &ts, nullptr, 0);
  }
  void wake() {
    word_.fetch_add(1, std::memory_order_acq_rel);
    (void)::syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word_), FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
  }

 private:
  static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t) && std::atomic<uint32_t>::is_always_lock_free);
  std::atomic<uint32_t> word_{0};
};

}  // namespace concord::intercept
