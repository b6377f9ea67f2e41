#include "intercept/completions.h"

#include <algorithm>
#include <cstdio>
#include <string>
#include <tuple>

#include "ipc/ring.h"

namespace concord::intercept {

std::pair<bool, uint64_t> CompletionBook::book(uint64_t key, CUstream app, bool foreign_ok, uint64_t seq, uint64_t every,
                                               bool force, uint64_t now_ns) {
  std::lock_guard<std::mutex> lock(tracks_mu_);
  Track& t = tracks_[key];
  t.handle = app;
  t.foreign_ok = foreign_ok;
  t.last_seq = std::max(t.last_seq, seq);  // threads sharing a stream may book out of seq order
  ++t.count;
  t.last_launch_ns = now_ns;
  if (!force && t.count - t.marked < every) return {false, 0};
  t.marked = t.count;
  return {true, t.count};
}

void CompletionBook::record_marker(CUstream stream, uint64_t key, uint64_t seq, uint64_t count) {
  CUevent event = nullptr;
  {
    std::lock_guard<std::mutex> lock(events_mu_);
    if (!free_events_.empty()) {
      event = free_events_.back();
      free_events_.pop_back();
    }
  }
  CUresult r = CUDA_SUCCESS;
  if (!event) {
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
    if (event) {
      std::lock_guard<std::mutex> lock(events_mu_);
      free_events_.push_back(event);
    }
    ended(key, seq, count, true, ipc::monotonic_ns());
    return;
  }
  markers_.fetch_add(1, std::memory_order_relaxed);
  std::lock_guard<std::mutex> lock(events_mu_);
  pending_.push_back(Marker{seq, key, count, event});
}

bool CompletionBook::mark_uncovered(uint64_t key, CUstream app) {
  uint64_t seq = 0, count = 0;
  {
    std::lock_guard<std::mutex> lock(tracks_mu_);
    Track& t = tracks_[key];
    if (t.count == t.marked) return false;
    seq = t.last_seq;
    count = t.marked = t.count;
  }
  record_marker(app, key, seq, count);
  return true;
}

void CompletionBook::ended(uint64_t key, uint64_t seq, uint64_t count, bool ok, uint64_t at_ns) {
  uint64_t newly = 0;
  {
    std::lock_guard<std::mutex> lock(tracks_mu_);
    Track& t = tracks_[key];
    if (count > t.ended) {
      newly = count - t.ended;
      t.ended = count;
    }
  }
  if (newly == 0 && ok) return;  // covered before (a synchronisation overtook the marker)
  ended_.fetch_add(newly, std::memory_order_acq_rel);
  report_(seq, key, ok, at_ns);
  reported_.fetch_add(1, std::memory_order_relaxed);
}

void CompletionBook::poll() {
  std::lock_guard<std::mutex> poll(poll_mu_);
  {
    std::lock_guard<std::mutex> lock(events_mu_);
    polling_.swap(pending_);
  }
  still_.clear();
  done_.clear();
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
    done_.push_back(m.event);
  }
  polling_.clear();
  std::lock_guard<std::mutex> lock(events_mu_);
  // Markers recorded meanwhile stay behind the older ones.
  still_.insert(still_.end(), pending_.begin(), pending_.end());
  pending_.swap(still_);
  free_events_.insert(free_events_.end(), done_.begin(), done_.end());
}

bool CompletionBook::markers_pending() const {
  std::lock_guard<std::mutex> lock(events_mu_);
  return !pending_.empty();
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
      if (t.count == t.marked || !t.foreign_ok || now - t.last_launch_ns < quiet_ns) continue;
      t.marked = t.count;
      due.emplace_back(t.handle, key, t.last_seq, t.count);
    }
  }
  for (const auto& [stream, key, seq, count] : due) record_marker(stream, key, seq, count);
  return static_cast<int>(due.size());
}

std::vector<std::array<uint64_t, 3>> CompletionBook::before_sync(uint64_t key, bool whole_context) {
  std::vector<std::array<uint64_t, 3>> covered;
  std::lock_guard<std::mutex> lock(tracks_mu_);
  if (whole_context) {
    for (const auto& [k, t] : tracks_) {
      if (t.count > t.ended) covered.push_back({k, t.last_seq, t.count});
    }
  } else if (const auto it = tracks_.find(key); it != tracks_.end() && it->second.count > it->second.ended) {
    covered.push_back({key, it->second.last_seq, it->second.count});
  }
  return covered;
}

void CompletionBook::after_sync(const std::vector<std::array<uint64_t, 3>>& covered, uint64_t at_ns) {
  for (const auto& [key, seq, count] : covered) {
    {
      std::lock_guard<std::mutex> lock(tracks_mu_);
      Track& t = tracks_[key];
      t.marked = std::max(t.marked, count);
    }
    ended(key, seq, count, true, at_ns);
  }
}

void CompletionBook::stream_gone(uint64_t key) {
  std::lock_guard<std::mutex> handles(handles_mu_);
  std::lock_guard<std::mutex> lock(tracks_mu_);
  if (const auto it = tracks_.find(key); it != tracks_.end()) it->second.foreign_ok = false;
}

}  // namespace concord::intercept
