// A per-thread copy of a shared map that changes rarely (a function's id, a stream's priority),
// read on the launch path without a lock: a lookup hits the calling thread's copy; a miss goes to
// the shared map under its owner's mutex and keeps what it found. Whoever changes or removes an
// entry in the shared map calls invalidate(), and every thread drops its copy at its next lookup.
// One owner at a time per thread and per cache type (the library has one of each); a thread that
// meets another owner starts its copy again.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <unordered_map>

namespace concord::intercept {

// Tag: a type of the user's own, so that two caches of one Key and Value keep separate copies.
template <typename Key, typename Value, typename Tag>
class ThreadCache {
 public:
  // A new cache (perhaps where a destroyed one was) makes every copy of its type stale.
  ThreadCache() { invalidate(); }
  ThreadCache(const ThreadCache&) = delete;
  ThreadCache& operator=(const ThreadCache&) = delete;
  // This thread's copy of `key`'s value, if it has one that no invalidation since made stale.
  std::optional<Value> find(const Key& key) const {
    Local* mine = local();
    if (!mine) return std::nullopt;  // the thread is ending: the shared map answers
    const uint64_t now = epoch_.load(std::memory_order_acquire);
    if (mine->owner != this || mine->epoch != now) {
      mine->map.clear();
      mine->owner = this;
      mine->epoch = now;
      return std::nullopt;
    }
    const auto it = mine->map.find(key);
    if (it == mine->map.end()) return std::nullopt;
    return it->second;
  }
  // Keeps `value` (read from the shared map after a find() that missed) in this thread's copy.
  void keep(const Key& key, const Value& value) const {
    Local* mine = local();
    if (mine && mine->owner == this) mine->map.insert_or_assign(key, value);
  }
  // The shared map changed: every thread's copy (of every cache of this type) is stale.
  void invalidate() { epoch_.fetch_add(1, std::memory_order_acq_rel); }

 private:
  // This thread's copy, or null once the thread (or, for the main thread, the process) is past
  // its thread-local destructors: a launch from a later destructor or atexit handler must not
  // touch a destroyed map. `gone` is trivially destructible, so it stays readable to the end.
  struct Local {
    const ThreadCache* owner = nullptr;
    uint64_t epoch = 0;
    std::unordered_map<Key, Value> map;
    ~Local() { gone = true; }
  };
  static inline thread_local bool gone = false;
  static Local* local() {
    if (gone) return nullptr;
    thread_local Local mine;
    return &mine;
  }
  static inline std::atomic<uint64_t> epoch_{1};
};

}  // namespace concord::intercept
