#include "intercept/memory_book.h"

#include <algorithm>

namespace concord::intercept {

void MemoryBook::set_quota(const MemoryQuota& quota) {
  reserved_.store(quota.reserved_bytes, std::memory_order_relaxed);
  limit_.store(quota.limit_bytes, std::memory_order_release);
}

MemoryQuota MemoryBook::quota() const {
  return MemoryQuota{limit_.load(std::memory_order_acquire), reserved_.load(std::memory_order_relaxed)};
}

bool MemoryBook::reserve(uint64_t bytes) {
  const uint64_t limit = limit_.load(std::memory_order_acquire);
  uint64_t now = live_.load(std::memory_order_relaxed);
  do {
    if (bytes > limit || now > limit - bytes) return false;
  } while (!live_.compare_exchange_weak(now, now + bytes, std::memory_order_acq_rel, std::memory_order_relaxed));
  const uint64_t after = now + bytes;
  uint64_t peak = peak_.load(std::memory_order_relaxed);
  while (after > peak && !peak_.compare_exchange_weak(peak, after, std::memory_order_acq_rel, std::memory_order_relaxed)) {
  }
  version_.fetch_add(1, std::memory_order_release);
  return true;
}

void MemoryBook::give_back(uint64_t bytes) {
  if (bytes == 0) return;
  // Never below zero: only bytes reserved before come back, each once.
  uint64_t now = live_.load(std::memory_order_relaxed);
  while (!live_.compare_exchange_weak(now, now >= bytes ? now - bytes : 0, std::memory_order_acq_rel, std::memory_order_relaxed)) {
  }
  version_.fetch_add(1, std::memory_order_release);
}

void MemoryBook::cancel(uint64_t bytes) { give_back(bytes); }

void MemoryBook::allocated(uint64_t ptr, uint64_t bytes) {
  uint64_t stale = 0;
  {
    std::lock_guard lock(ptr_mu_);
    auto [it, fresh] = pointers_.emplace(ptr, bytes);
    if (!fresh) {
      // The driver gave out an address the book still holds: its free went by a path the library
      // does not see. That allocation is gone; its bytes go back.
      stale = it->second;
      it->second = bytes;
    }
  }
  give_back(stale);
}

MemoryBook::Taken MemoryBook::take(uint64_t ptr) {
  std::lock_guard lock(ptr_mu_);
  const auto it = pointers_.find(ptr);
  if (it == pointers_.end()) return Taken{ptr, 0};
  const Taken t{ptr, it->second};
  pointers_.erase(it);
  return t;
}

void MemoryBook::freed(const Taken& taken, bool ok) {
  if (taken.bytes == 0) return;
  if (ok) {
    give_back(taken.bytes);
    return;
  }
  std::lock_guard lock(ptr_mu_);
  pointers_.emplace(taken.ptr, taken.bytes);
}

void MemoryBook::created(uint64_t handle, uint64_t bytes) {
  const auto [it, fresh] = physical_.emplace(handle, Physical{bytes, 1, 0});
  if (!fresh) {
    // A handle value the book still holds, handed out again: the old allocation is gone.
    const uint64_t stale = it->second.bytes;
    it->second = Physical{bytes, 1, 0};
    give_back(stale);
  }
}

void MemoryBook::retained(uint64_t handle) {
  if (auto it = physical_.find(handle); it != physical_.end()) ++it->second.references;
}

void MemoryBook::mapped(uint64_t va, uint64_t handle) {
  // A mapping the book still holds at `va` was unmapped by a path the library does not see.
  (void)unmapped(va, 1);
  const auto it = physical_.find(handle);
  if (it == physical_.end()) return;  // memory the library does not count (imported, or from before it started)
  mappings_[va] = handle;
  ++it->second.mappings;
}

uint64_t MemoryBook::unmapped(uint64_t va, uint64_t size) {
  uint64_t freed = 0;
  for (auto m = mappings_.lower_bound(va); m != mappings_.end() && m->first - va < size;) {
    const uint64_t handle = m->second;
    m = mappings_.erase(m);
    if (auto it = physical_.find(handle); it != physical_.end()) {
      if (it->second.mappings > 0) --it->second.mappings;
      freed += maybe_free(it);
    }
  }
  return freed;
}

uint64_t MemoryBook::released(uint64_t handle) {
  const auto it = physical_.find(handle);
  if (it == physical_.end()) return 0;
  if (it->second.references > 0) --it->second.references;
  return maybe_free(it);
}

uint64_t MemoryBook::maybe_free(std::unordered_map<uint64_t, Physical>::iterator it) {
  if (it->second.references > 0 || it->second.mappings > 0) return 0;
  const uint64_t bytes = it->second.bytes;
  physical_.erase(it);
  give_back(bytes);
  return bytes;
}

std::pair<uint64_t, uint64_t> MemoryBook::info(uint64_t real_free, uint64_t real_total) const {
  const uint64_t limit = limit_.load(std::memory_order_acquire);
  if (limit == kNoMemoryLimit) return {real_free, real_total};
  const uint64_t used = live_.load(std::memory_order_acquire);
  const uint64_t left = used >= limit ? 0 : limit - used;
  return {std::min(left, real_free), limit};
}

bool MemoryBook::refused(uint64_t now_ns, uint64_t interval_ns, uint64_t* since) {
  const uint64_t n = refusals_.fetch_add(1, std::memory_order_relaxed) + 1;
  uint64_t last = last_log_ns_.load(std::memory_order_relaxed);
  if (last != 0 && now_ns - last < interval_ns) return false;
  // One thread says it: the one that moves the time of the last line.
  if (!last_log_ns_.compare_exchange_strong(last, now_ns, std::memory_order_acq_rel)) return false;
  const uint64_t before = logged_refusals_.exchange(n, std::memory_order_acq_rel);
  if (since) *since = n - before;
  return true;
}

}  // namespace concord::intercept
