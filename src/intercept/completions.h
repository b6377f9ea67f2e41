// What an intercepted process has launched and what is known to have ended, without an event per
// launch. Launches are booked per application stream; now and then an event (a "marker") is
// recorded behind one, and when it completes every launch of that stream up to it has ended. The
// application's own synchronisations say the same for free. Each end is reported through `report`
// (the tenant client's completion: a stream's launches up to a seq), and the in-flight count
// (launched and not known ended) is what an LC flag and a BE in-flight cap read.
#pragma once

#include <cuda.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

#include "intercept/bounded_queue.h"
#include "intercept/cu_handles.h"
#include "intercept/real_driver.h"
#include "intercept/thread_cache.h"

namespace concord::intercept {

class CompletionBook {
 public:
  // report(seq, stream key, ok, at_ns): the stream's launches up to seq ended.
  using Report = std::function<void(uint64_t seq, uint64_t key, bool ok, uint64_t at_ns)>;
  CompletionBook(const RealDriver& driver, Report report) : driver_(driver), report_(std::move(report)) {}

  // Counts a launch about to go out (so that in_flight() never reads 0 while it does).
  void launching() { launched_.fetch_add(1); }  // sequentially consistent: see maybe_lower_flag
  // A launch counted by launching() that nobody will track (the tenant went pass-through).
  void forget_one() { ended_.fetch_add(1, std::memory_order_acq_rel); }
  // Ended first: what ended was launched before, so the difference never wraps.
  uint64_t in_flight() const {
    const uint64_t ended = ended_.load();
    return launched_.load() - ended;
  }

  // Books launch `seq` on stream `key`, made at `now_ns` (`app`: the handle to record on;
  // `foreign_ok`: another thread may name it), without a lock. Whether a marker should follow it
  // (when `every` launches went by since the last one, or `force`), the stream's count it covers
  // and the latest launch of the stream it covers (another thread's, perhaps, launched on the same
  // stream before this one was counted).
  struct Booked {
    bool marker = false;
    uint64_t count = 0;
    uint64_t seq = 0;
  };
  Booked book(uint64_t key, CUstream app, bool foreign_ok, uint64_t seq, uint64_t every, bool force, uint64_t now_ns);
  // Records a marker on `stream` behind launch `seq`, the `count`-th of stream `key`. Without an
  // event (the driver refused one) the launches are said to have ended now rather than never.
  void record_marker(CUstream stream, uint64_t key, uint64_t seq, uint64_t count);
  // A marker behind the stream's launches no marker covers yet, recorded on `app` by the calling
  // thread (false when every launch is covered).
  bool mark_uncovered(uint64_t key, CUstream app);
  // Queries the pending markers (one caller at a time) and reports those that completed.
  void poll();
  bool markers_pending() const { return markers_out_.load() > 0; }  // seq_cst: see wake_poller
  // Markers from the completion thread behind streams quiet for `quiet_ns` whose last launches no
  // marker covers (not while a capture is in progress: the caller checks). How many.
  int tail_markers(uint64_t quiet_ns);

  // A synchronisation: (key, last seq, count) of the streams it covers, taken before it begins;
  // after it returned, those launches have ended.
  std::vector<std::array<uint64_t, 3>> before_sync(uint64_t key, bool whole_context);
  void after_sync(const std::vector<std::array<uint64_t, 3>>& covered, uint64_t at_ns);
  // A stream the application is about to destroy: no marker is recorded on its handle from
  // another thread once this returns (a tail marker being recorded on it is waited for).
  void stream_gone(uint64_t key);

  uint64_t markers() const { return markers_.load(std::memory_order_relaxed); }
  uint64_t reported() const { return reported_.load(std::memory_order_relaxed); }
  // Event queries poll() made (at most one per stream per poll with markers pending).
  uint64_t queries() const { return queries_.load(std::memory_order_relaxed); }

 private:
  // One application stream's launches. Booking is lock-free: a launch raises last_seq, then counts
  // itself, so whoever reads count and then last_seq covers at least the launches it counted.
  // tracks_mu_ guards the map (a stream's first booking on a thread inserts), never a Track's
  // fields; tracks are never removed, so a thread keeps its pointer (track_cache_).
  struct Track {
    std::atomic<CUstream> handle{nullptr};  // what another thread records a marker on (null: the legacy stream)
    std::atomic<bool> foreign_ok{true};     // false for a thread's per-thread default stream, or a destroyed stream
    std::atomic<uint64_t> last_seq{0};      // the last launch noticed on it
    std::atomic<uint64_t> count{0};         // launches on it
    std::atomic<uint64_t> marked{0};        // launches a marker (pending or done) or a synchronisation covers
    std::atomic<uint64_t> ended{0};         // launches known to have ended
    std::atomic<uint64_t> last_launch_ns{0};
  };
  struct Marker {
    uint64_t seq = 0;
    uint64_t key = 0;
    uint64_t count = 0;
    CUevent event = nullptr;
  };
  struct TrackTag {};
  Track& track(uint64_t key);
  // Raises `marked` to `count` when it is below: whether this call did.
  static bool mark(Track& t, uint64_t count);
  void ended(uint64_t key, uint64_t seq, uint64_t count, bool ok, uint64_t at_ns);
  void give_back(CUevent event);

  const RealDriver& driver_;
  Report report_;
  std::mutex handles_mu_;  // the application's stream handles, while another thread records on them
  std::mutex tracks_mu_;
  std::unordered_map<uint64_t, Track> tracks_;
  ThreadCache<uint64_t, Track*, TrackTag> track_cache_;
  std::atomic<uint64_t> launched_{0};
  std::atomic<uint64_t> ended_{0};
  // Markers recorded and events free, handed between the launching threads and the completion
  // thread without a lock; past their bound (more markers pending than kQueueSlots) they spill to
  // lists behind events_mu_.
  static constexpr size_t kQueueSlots = 4096;
  BoundedQueue<Marker> recorded_{kQueueSlots};
  BoundedQueue<CUevent> free_events_{kQueueSlots};
  std::atomic<bool> spilled_{false};
  std::atomic<uint64_t> markers_out_{0};  // recorded and not yet seen complete
  std::mutex events_mu_;
  std::vector<OwnedEvent> events_;        // every marker event made
  std::vector<Marker> recorded_spill_;
  std::vector<CUevent> free_spill_;
  std::mutex poll_mu_;
  // poll()'s working lists (poll_mu_), kept so that a poll allocates nothing once warm.
  std::vector<Marker> polling_, still_;
  std::vector<uint64_t> behind_;  // streams with a marker not yet reached in this poll
  std::atomic<uint64_t> queries_{0};
  std::atomic<uint64_t> markers_{0};
  std::atomic<uint64_t> reported_{0};
};

}  // namespace concord::intercept
