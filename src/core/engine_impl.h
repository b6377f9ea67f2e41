// The engine's insides, shared by its four files (never included outside src/core/engine_*.cpp):
// what it keeps per launch and per tenant, and the Engine class, a SchedContext to the policy and a
// TenantSink to the source. engine_state.cpp: tenants, streams and the ready list;
// engine_dispatch.cpp: the requests a policy makes, validated once; engine_completions.cpp: what
// the backend reports; engine.cpp: the run loop and its results.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <deque>
#include <functional>
#include <limits>
#include <queue>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "concord/engine.h"

namespace concord::engine_impl {

inline constexpr double kNever = std::numeric_limits<double>::infinity();

struct LaunchState {
  LaunchRecord record;
  const KernelSpec* kernel = nullptr;
  bool last_of_request = false;
  int variant = -1;                 // fixed by the first dispatch
  std::vector<BlockRange> pending;  // sorted, disjoint
  int running = 0;                  // dispatches in flight
  int64_t blocks_done = 0;
  Seconds request_arrival = 0;
  bool dispatched_once = false;
  bool done = false;                // finished, or dropped: nothing refers to it any more
  bool reached = false;             // the front of its tenant's stream: ready once it has pending blocks
  int64_t ready_seq = 0;            // order in which launches were reached (ties of ready time)
  int64_t successor = -1;           // the next launch of its stream, dispatched behind this one
  int64_t pending_blocks() const {
    int64_t n = 0;
    for (const auto& r : pending) n += r.size();
    return n;
  }
};

// A tenant's submitted launches not yet finished, in stream order: a vector read from `head_`
// (an empty one holds no memory, where an empty std::deque holds a block).
class StreamQueue {
 public:
  bool empty() const { return head_ == ids_.size(); }
  size_t size() const { return ids_.size() - head_; }
  int64_t front() const { return ids_[head_]; }
  int64_t operator[](size_t i) const { return ids_[head_ + i]; }
  std::vector<int64_t>::const_iterator begin() const { return ids_.begin() + static_cast<std::ptrdiff_t>(head_); }
  std::vector<int64_t>::const_iterator end() const { return ids_.end(); }
  void push_back(int64_t id) { ids_.push_back(id); }
  void pop_front() {
    if (++head_ == ids_.size()) {
      ids_.clear();
      head_ = 0;
    } else if (head_ >= 64 && head_ * 2 >= ids_.size()) {
      ids_.erase(ids_.begin(), ids_.begin() + static_cast<std::ptrdiff_t>(head_));
      head_ = 0;
    }
  }
  void remove(int64_t id) {
    ids_.erase(std::remove(ids_.begin() + static_cast<std::ptrdiff_t>(head_), ids_.end(), id), ids_.end());
  }
  // Gives the memory back (an empty queue only).
  void release() {
    std::vector<int64_t>().swap(ids_);
    head_ = 0;
  }

 private:
  std::vector<int64_t> ids_;
  size_t head_ = 0;
};

struct TenantState {
  TenantView view;
  TenantRecord record;
  StreamQueue stream;                // submitted launches not yet finished, in stream order
  mutable std::vector<QueuedLaunch> queued;  // view of stream[1..] not yet dispatched
  mutable bool queued_dirty = true;
  int64_t submitted_in_request = 0;  // launches submitted into the latest request
  int64_t open_request = -1;         // the latest request that has not yet had its last launch
  int64_t last_submitted = -1;       // the launch it submitted last
  int64_t last_submitted_request = -1;
  Seconds last_finished_end = 0;     // the end of its latest finished launch
  int64_t requests_base = 0;         // index of record.requests[0] (earlier ones trimmed)
  bool finished = false;             // left and drained
  bool dropped = false;              // gone (TenantSink::drop): what it left is dropped, failures too
  bool released = false;             // finished, its buffers freed (EngineOptions::keep_history false)
};

// Removes [r.begin, r.end) from `pending`, which must contain it.
inline bool take_range(std::vector<BlockRange>& pending, BlockRange r) {
  for (size_t i = 0; i < pending.size(); ++i) {
    BlockRange p = pending[i];
    if (r.begin < p.begin || r.end > p.end) continue;
    pending.erase(pending.begin() + static_cast<std::ptrdiff_t>(i));
    if (r.end < p.end) pending.insert(pending.begin() + static_cast<std::ptrdiff_t>(i), BlockRange{r.end, p.end});
    if (p.begin < r.begin) pending.insert(pending.begin() + static_cast<std::ptrdiff_t>(i), BlockRange{p.begin, r.begin});
    return true;
  }
  return false;
}

inline void give_back_range(std::vector<BlockRange>& pending, BlockRange r) {
  if (r.empty()) return;
  auto it = std::lower_bound(pending.begin(), pending.end(), r,
                             [](const BlockRange& a, const BlockRange& b) { return a.begin < b.begin; });
  pending.insert(it, r);
  // Merge neighbours.
  std::vector<BlockRange> merged;
  for (const auto& p : pending) {
    if (!merged.empty() && merged.back().end == p.begin) merged.back().end = p.end;
    else merged.push_back(p);
  }
  pending = std::move(merged);
}

class Engine final : public SchedContext, public TenantSink {
 public:
  Engine(TenantSource& s, Backend& b, Policy& p, const EngineOptions& o)
      : source_(s), backend_(b), policy_(p), options_(o), rng_(o.seed), estimator_(b.device()) {}

  RunOutcome run();

  // SchedContext
  Seconds now() const override { return backend_.now(); }
  const DeviceSpec& device() const override { return backend_.device(); }
  std::span<const TenantView> tenants() const override { return views_; }
  const Estimator& estimator() const override { return estimator_; }
  Capabilities capabilities(const KernelSpec& k) const override { return backend_.capabilities(k); }
  std::span<const ReadyLaunch> ready() const override;
  std::span<const QueuedLaunch> queued(TenantId tenant) const override;
  std::span<const RunningDispatch> running() const override { return running_; }
  std::mt19937_64& rng() override { return rng_; }
  Result<DispatchId> dispatch(LaunchId launch, const Placement& placement, DispatchId after) override;
  Status resize(DispatchId dispatch, const SmSet& sms) override;
  Status set_tlp(DispatchId dispatch, int tlp, const SmSet& tight_sms, int tight_tlp) override;
  Status preempt(DispatchId dispatch) override;
  Result<std::vector<int64_t>> progress(DispatchId dispatch) const override { return backend_.progress(dispatch); }
  void request_tick(Seconds at) override { ticks_.push(at); }
  Status prepare_sm_set(const SmSet& sms, TenantId tenant) override {
    if (started_) return Status::failed_precondition("prepare_sm_set: only before the clock starts");
    return backend_.prepare_sm_set(sms, tenant);
  }

  // TenantSink
  Result<TenantId> join(const TenantInfo& info, std::optional<TenantHints> hints,
                        const std::vector<const KernelSpec*>& kernels) override;
  Result<int64_t> arrive(TenantId tenant, Seconds at) override;
  Status submit(TenantId tenant, const LaunchSubmission& launch) override;
  Status leave(TenantId tenant) override;
  Status end_request(TenantId tenant) override;
  Status drop(TenantId tenant, const std::string& why) override;

 private:
  // A dropped tenant's launch that will not run (never dispatched, or its dispatch failed):
  // out of its stream, unfinished (end -1).
  void discard(TenantState& t, LaunchState& ls);
  // A completion of a dispatch whose tenants were all dropped: recorded, no error, nothing more runs.
  void complete_dropped(const Completion& c);
  bool all_parts_dropped(const DispatchRecord& rec) const;
  // Copies what a completion says into its dispatch's record.
  void note_end(DispatchRecord& rec, const Completion& c) const {
    rec.start = c.start;
    rec.end = c.end;
    rec.seen = backend_.now();
    rec.preempted = c.preempted;
    rec.blocks_done = c.blocks_done;
    rec.error = c.error ? "" : c.error.message();
  }
  LaunchState* launch_state(LaunchId id) {
    return id.value >= launch_base_ && id.value < launch_base_ + static_cast<int64_t>(launches_.size()) ? &launch_at(id.value) : nullptr;
  }
  // Launches, dispatch records and requests by their ids, which count from the first ever made
  // (EngineOptions::keep_history false trims finished ones from the front).
  LaunchState& launch_at(int64_t id) { return launches_[static_cast<size_t>(id - launch_base_)]; }
  const LaunchState& launch_at(int64_t id) const { return launches_[static_cast<size_t>(id - launch_base_)]; }
  DispatchRecord& dispatch_at(int64_t id) { return dispatch_records_[static_cast<size_t>(id - dispatch_base_)]; }
  const DispatchRecord& dispatch_at(int64_t id) const { return dispatch_records_[static_cast<size_t>(id - dispatch_base_)]; }
  bool known_dispatch(DispatchId id) const {
    return id.value >= dispatch_base_ && id.value < dispatch_base_ + static_cast<int64_t>(dispatch_records_.size());
  }
  static RequestRecord& request_at(TenantState& t, int64_t request) {
    return t.record.requests[static_cast<size_t>(request - t.requests_base)];
  }
  // Forgets finished launches, dispatches and requests (keep_history false).
  void trim_history();
  TenantState* tenant_state(TenantId id) {
    return id.valid() && id.value < static_cast<int64_t>(tenants_.size()) ? &tenants_[static_cast<size_t>(id.value)] : nullptr;
  }
  std::string describe(const LaunchState& ls, bool partner) const;
  Status check_part(const LaunchState& ls, bool partner, int variant, const BlockRange& range) const;
  // Whether `ls` may be dispatched now: ready, or the next launch of a stream behind `after`.
  Status check_dispatchable(const LaunchState& ls, DispatchId after) const;
  // A queued dispatch whose predecessor still runs: no resize, TLP change or preemption yet.
  Status check_not_queued(const RunningDispatch& r, const char* what) const;
  Status handle_completion(const Completion& c);
  // A completion that came while the run ends early (or the failed one that ends it): recorded
  // for the results, with no policy or source called.
  void record_late(const Completion& c);
  // The run itself; an error ends it early.
  Status drive();
  // After an early end: stops what still runs (abort_all), records what it finished, and names
  // what could not be stopped.
  Status wind_down(Status why);
  RunRecord collect(std::chrono::steady_clock::time_point wall0);
  // "tenant 'a' kernel 'k' (launch 3, dispatch 7)" for each part of a dispatch.
  std::string describe_dispatch(const DispatchRecord& rec) const;
  std::string describe_running() const;
  // The front of `t`'s stream is reached: it becomes ready (or starts running, if dispatched behind).
  void reach_front(TenantState& t, Seconds ready_at);
  Status call(const char* hook, const std::function<Status()>& fn);
  Status notify_joined();
  Status notify_ready();
  Status pump_source();
  void refresh_ready(const LaunchState& ls);
  bool all_done() const;

  TenantSource& source_;
  Backend& backend_;
  Policy& policy_;
  EngineOptions options_;
  std::mt19937_64 rng_;
  Estimator estimator_;
  std::deque<TenantState> tenants_;   // stable addresses as tenants join
  std::vector<TenantView> views_;     // what policies see, indexed by TenantId
  std::deque<LaunchState> launches_;
  int64_t launch_base_ = 0;
  std::vector<RunningDispatch> running_;
  std::deque<DispatchRecord> dispatch_records_;
  int64_t dispatch_base_ = 0;
  mutable std::vector<ReadyLaunch> ready_;
  mutable bool ready_dirty_ = true;
  std::priority_queue<Seconds, std::vector<Seconds>, std::greater<>> ticks_;
  std::vector<LaunchId> newly_ready_;
  std::vector<TenantId> newly_joined_;
  std::vector<TenantId> newly_left_;
  int64_t reached_ = 0;               // launches reached so far (ready_seq)
  std::vector<int64_t> reached_order_;  // reached, unfinished launches by (ready time, ready_seq)
  int64_t unfinished_ = 0;            // launches submitted and not finished
  Seconds source_next_ = kNever;      // when the source next has something by itself
  Seconds latest_end_ = 0;            // the latest completion end seen (device clock)
  EngineStats stats_;
  bool started_ = false;
  std::vector<DispatchId> failed_;    // dispatches that failed on the device, in the order seen
};

// A launch's entry in the ready list, and the ready order (engine_state.cpp).
ReadyLaunch ready_entry(const LaunchState& ls);
bool ready_before(const LaunchState& a, const LaunchState& b);

}  // namespace concord::engine_impl
