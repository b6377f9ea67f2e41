#include "intercept/completions.h"

#include <algorithm>
#include <cstdio>
#include <string>
#include <tuple>

#include "ipc/ring.h"

namespace concord::intercept {

CompletionBook::Track& CompletionBook::track(uint64_t key) {
  if (const std::optional<Track*> t = track_cache_.find(key)) return **t;
  std::lock_guard<std::mutex> lock(tracks_mu_);
  Track& t = tracks_[key];
  track_cache_.keep(key, &t);
  return t;
}

bool CompletionBook::mark(Track& t, uint64_t count) {
  uint64_t m = t.marked.load(std::memory_order_acquire);
  while (m < count) {
    if (t.marked.compare_exchange_weak(m, count, std::memory_order_acq_rel, std::memory_order_acquire)) return true;
  }
  return false;
}

CompletionBook::Booked CompletionBook::book(uint64_t key, CUstream app, bool foreign_ok, uint64_t seq, uint64_t every, bool force,
                                            uint64_t now_ns) {
  Track& t = track(key);
  t.handle.store(app, std::memory_order_relaxed);
  t.foreign_ok.store(foreign_ok, std::memory_order_relaxed);
  // Threads sharing a stream may book out of seq order: the stream's latest is the greatest.
  uint64_t last = t.last_seq.load(std::memory_order_relaxed);
  while (last < seq && !t.last_seq.compare_exchange_weak(last, seq, std::memory_order_acq_rel, std::memory_order_relaxed)) {
  }
  const uint64_t count = t.count.fetch_add(1, std::memory_order_acq_rel) + 1;
  t.last_launch_ns.store(now_ns, std::memory_order_relaxed);
  const uint64_t marked = t.marked.load(std::memory_order_acquire);
  if (marked >= count || (!force && count - marked < every)) return {};
  if (!mark(t, count)) return {};
  return {true, count, t.last_seq.load(std::memory_order_acquire)};
}

void CompletionBook::give_back(CUevent event) {
  if (free_events_.push(event)) return;
  std::lock_guard<std::mutex> lock(events_mu_);
  free_spill_.push_back(event);
  spilled_.store(true, std::memory_order_release);
}

void CompletionBook::record_marker(CUstream stream, uint64_t key, uint64_t seq, uint64_t count) {
  CUevent event = nullptr;
  CUresult r = CUDA_SUCCESS;
  if (!free_events_.pop(event)) {
    // Until the pool is warm (or while more markers are out than it holds): a new event.
    r = driver_.event_create(&event, CU_EVENT_DISABLE_TIMING);
    if (r == CUDA_SUCCESS) {
      std::lock_guard<std::mutex> lock(events_mu_);
      events_.emplace_back(&driver_, event);
    } else {
      event = nullptr;
    }
  }
  if (r == CUDA_SUCCESS) r = driver_.event_record(event, stream);
  if (r != CUDA_SUCCESS) {
    std::fprintf(stderr, "concord-intercept: completion of launch %llu not tracked: %s\n", static_cast<unsigned long long>(seq),
                 driver_status(r, "cuEventRecord", __FILE__, __LINE__).message().c_str());
    if (event) give_back(event);
    ended(key, seq, count, true, ipc::monotonic_ns());
    return;
  }
  markers_.fetch_add(1, std::memory_order_relaxed);
  markers_out_.fetch_add(1);  // sequentially consistent: see Interceptor::wake_poller
  const Marker m{seq, key, count, event};
  if (recorded_.push(m)) return;
  std::lock_guard<std::mutex> lock(events_mu_);
  recorded_spill_.push_back(m);
  spilled_.store(true, std::memory_order_release);
}

bool CompletionBook::mark_uncovered(uint64_t key, CUstream app) {
  Track& t = track(key);
  const uint64_t count = t.count.load(std::memory_order_acquire);
  if (!mark(t, count)) return false;
  record_marker(app, key, t.last_seq.load(std::memory_order_acquire), count);
  return true;
}

void CompletionBook::ended(uint64_t key, uint64_t seq, uint64_t count, bool ok, uint64_t at_ns) {
  Track& t = track(key);
  uint64_t before = t.ended.load(std::memory_order_acquire);
  while (before < count && !t.ended.compare_exchange_weak(before, count, std::memory_order_acq_rel, std::memory_order_acquire)) {
  }
  const uint64_t newly = count > before ? count - before : 0;
  if (newly == 0 && ok) return;  // covered before (a synchronisation overtook the marker)
  ended_.fetch_add(newly, std::memory_order_acq_rel);
  report_(seq, key, ok, at_ns);
  reported_.fetch_add(1, std::memory_order_relaxed);
}

void CompletionBook::poll() {
  std::lock_guard<std::mutex> poll(poll_mu_);
  // The markers still pending from the last poll, then those recorded since, in that order.
  polling_.swap(still_);
  still_.clear();
  Marker fresh;
  while (recorded_.pop(fresh)) polling_.push_back(fresh);
  if (spilled_.load(std::memory_order_acquire)) {
    std::lock_guard<std::mutex> lock(events_mu_);
    polling_.insert(polling_.end(), recorded_spill_.begin(), recorded_spill_.end());
    recorded_spill_.clear();
    size_t moved = 0;
    while (moved < free_spill_.size() && free_events_.push(free_spill_[moved])) ++moved;
    free_spill_.erase(free_spill_.begin(), free_spill_.begin() + static_cast<std::ptrdiff_t>(moved));
    spilled_.store(!free_spill_.empty(), std::memory_order_release);
  }
  behind_.clear();
  for (const Marker& m : polling_) {
    // A stream runs in order: behind a marker it has not reached, its later markers are not
    // reached either, so each stream costs one query per poll however many markers it has
    // pending. (Two threads recording on one stream may append out of order; a marker found
    // behind an unfinished one is then reported a poll later, never wrongly.)
    if (std::find(behind_.begin(), behind_.end(), m.key) != behind_.end()) {
      still_.push_back(m);
      continue;
    }
    queries_.fetch_add(1, std::memory_order_relaxed);
    const CUresult r = driver_.event_query(m.event);
    if (r == CUDA_ERROR_NOT_READY) {
      still_.push_back(m);
      behind_.push_back(m.key);
      continue;
    }
    ended(m.key, m.seq, m.count, r == CUDA_SUCCESS, ipc::monotonic_ns());
    give_back(m.event);
    markers_out_.fetch_sub(1, std::memory_order_acq_rel);
  }
  // What is still pending waits in still_, ahead of what is recorded meanwhile.
  polling_.clear();
}

int CompletionBook::tail_markers(uint64_t quiet_ns) {
  // Held while recording on the application's handles: a stream the application destroys
  // meanwhile waits in stream_gone() until these markers are recorded, and is not marked after.
  std::lock_guard<std::mutex> handles(handles_mu_);
  const uint64_t now = ipc::monotonic_ns();
  std::vector<std::tuple<CUstream, uint64_t, uint64_t, uint64_t>> due;
  {
    std::lock_guard<std::mutex> lock(tracks_mu_);
    for (auto& [key, t] : tracks_) {
      if (!t.foreign_ok.load(std::memory_order_acquire) || now - t.last_launch_ns.load(std::memory_order_relaxed) < quiet_ns) continue;
      const uint64_t count = t.count.load(std::memory_order_acquire);
      if (!mark(t, count)) continue;
      due.emplace_back(t.handle.load(std::memory_order_relaxed), key, t.last_seq.load(std::memory_order_acquire), count);
    }
  }
  for (const auto& [stream, key, seq, count] : due) record_marker(stream, key, seq, count);
  return static_cast<int>(due.size());
}

std::vector<std::array<uint64_t, 3>> CompletionBook::before_sync(uint64_t key, bool whole_context) {
  std::vector<std::array<uint64_t, 3>> covered;
  const auto cover = [&](uint64_t k, const Track& t) {
    const uint64_t count = t.count.load(std::memory_order_acquire);
    if (count > t.ended.load(std::memory_order_acquire)) covered.push_back({k, t.last_seq.load(std::memory_order_acquire), count});
  };
  std::lock_guard<std::mutex> lock(tracks_mu_);
  if (whole_context) {
    for (const auto& [k, t] : tracks_) cover(k, t);
  } else if (const auto it = tracks_.find(key); it != tracks_.end()) {
    cover(key, it->second);
  }
  return covered;
}

void CompletionBook::after_sync(const std::vector<std::array<uint64_t, 3>>& covered, uint64_t at_ns) {
  for (const auto& [key, seq, count] : covered) {
    (void)mark(track(key), count);
    ended(key, seq, count, true, at_ns);
  }
}

void CompletionBook::stream_gone(uint64_t key) {
  std::lock_guard<std::mutex> handles(handles_mu_);
  std::lock_guard<std::mutex> lock(tracks_mu_);
  if (const auto it = tracks_.find(key); it != tracks_.end()) it->second.foreign_ok.store(false, std::memory_order_release);
}

}  // namespace concord::intercept
