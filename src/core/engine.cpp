// The engine loop: tenant source -> ready launches -> policy -> placements -> backend -> completions.
#include "concord/engine.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <deque>
#include <functional>
#include <limits>
#include <queue>
#include <random>

namespace concord {
namespace {

constexpr double kNever = std::numeric_limits<double>::infinity();

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
bool take_range(std::vector<BlockRange>& pending, BlockRange r) {
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

void give_back_range(std::vector<BlockRange>& pending, BlockRange r) {
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
    return id.value >= launch_base_ && id.value < launch_base_ + static_cast<int64_t>(launches_.size()) ? &L(id.value) : nullptr;
  }
  // Launches, dispatch records and requests by their ids, which count from the first ever made
  // (EngineOptions::keep_history false trims finished ones from the front).
  LaunchState& L(int64_t id) { return launches_[static_cast<size_t>(id - launch_base_)]; }
  const LaunchState& L(int64_t id) const { return launches_[static_cast<size_t>(id - launch_base_)]; }
  DispatchRecord& D(int64_t id) { return dispatch_records_[static_cast<size_t>(id - dispatch_base_)]; }
  const DispatchRecord& D(int64_t id) const { return dispatch_records_[static_cast<size_t>(id - dispatch_base_)]; }
  bool known_dispatch(DispatchId id) const {
    return id.value >= dispatch_base_ && id.value < dispatch_base_ + static_cast<int64_t>(dispatch_records_.size());
  }
  static RequestRecord& R(TenantState& t, int64_t request) {
    return t.record.requests[static_cast<size_t>(request - t.requests_base)];
  }
  // Forgets finished launches, dispatches and requests (keep_history false).
  void trim_history();
  TenantState* tenant_state(TenantId id) {
    return id.valid() && id.value < static_cast<int64_t>(tenants_.size()) ? &tenants_[static_cast<size_t>(id.value)] : nullptr;
  }
  std::string describe(const LaunchState& ls, bool partner) const;
  Status check_part(const LaunchState& ls, bool partner, int variant, const BlockRange& range,
                    const Capabilities& caps) const;
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

ReadyLaunch ready_entry(const LaunchState& ls) {
  ReadyLaunch r;
  r.id = ls.record.id;
  r.tenant = ls.record.tenant;
  r.kernel = ls.kernel;
  r.request = ls.record.request;
  r.index = ls.record.index;
  r.last_of_request = ls.last_of_request;
  r.ready_since = ls.record.ready;
  r.request_arrival = ls.request_arrival;
  r.pending = ls.pending.front();
  r.pending_blocks = ls.pending_blocks();
  r.has_running_dispatch = ls.running > 0;
  r.variant = ls.dispatched_once ? ls.variant : -1;
  return r;
}

// Ready order: by the time a launch became ready, then by the order launches were reached.
bool ready_before(const LaunchState& a, const LaunchState& b) {
  return a.record.ready != b.record.ready ? a.record.ready < b.record.ready : a.ready_seq < b.ready_seq;
}

std::span<const ReadyLaunch> Engine::ready() const {
  if (ready_dirty_) {
    ready_.clear();
    for (int64_t id : reached_order_) {
      const LaunchState& ls = L(id);
      if (!ls.pending.empty()) ready_.push_back(ready_entry(ls));
    }
    ready_dirty_ = false;
  }
  return ready_;
}

void Engine::refresh_ready(const LaunchState& ls) {
  // One launch changed (dispatched, came back, reached or finished): patch its entry in place
  // rather than rebuild the list, so a decision costs the same with 4 tenants or 16.
  if (ready_dirty_) return;
  auto it = std::find_if(ready_.begin(), ready_.end(), [&](const ReadyLaunch& r) { return r.id == ls.record.id; });
  if (!ls.reached || ls.pending.empty()) {
    if (it != ready_.end()) ready_.erase(it);
    return;
  }
  if (it != ready_.end()) {
    *it = ready_entry(ls);
    return;
  }
  it = std::find_if(ready_.begin(), ready_.end(),
                    [&](const ReadyLaunch& r) { return ready_before(ls, L(r.id.value)); });
  ready_.insert(it, ready_entry(ls));
}

std::span<const QueuedLaunch> Engine::queued(TenantId tenant) const {
  if (!tenant.valid() || tenant.value >= static_cast<int64_t>(tenants_.size())) return {};
  const TenantState& t = tenants_[static_cast<size_t>(tenant.value)];
  if (t.queued_dirty) {
    t.queued.clear();
    for (size_t i = 1; i < t.stream.size(); ++i) {
      const LaunchState& ls = L(t.stream[i]);
      if (ls.dispatched_once) continue;
      t.queued.push_back(QueuedLaunch{ls.record.id, ls.kernel, ls.record.request, ls.last_of_request});
    }
    t.queued_dirty = false;
  }
  return t.queued;
}

// "dispatch of tenant 'a' launch N (kernel)": built only when a check fails, off the fast path.
std::string Engine::describe(const LaunchState& ls, bool partner) const {
  return "dispatch of tenant '" + tenants_[static_cast<size_t>(ls.record.tenant.value)].view.info.name + "' launch " +
         std::to_string(ls.record.id.value) + " (" + ls.kernel->name + ")" + (partner ? " as fusion partner" : "");
}

Status Engine::check_part(const LaunchState& ls, bool partner, int variant, const BlockRange& range,
                          const Capabilities& caps) const {
  if (variant < 0 || variant >= ls.kernel->variant_count()) {
    return Status::invalid_argument(describe(ls, partner) + ": kernel has no variant " + std::to_string(variant));
  }
  if (ls.dispatched_once && variant != ls.variant) {
    return Status::invalid_argument(describe(ls, partner) + ": the launch already runs variant " +
                                    std::to_string(ls.variant) + "; a launch keeps one variant");
  }
  if (variant != ls.kernel->default_variant && !caps.block_variants) {
    return Status::unsupported(describe(ls, partner) + ": no block-size variants on this backend");
  }
  if (range.empty()) return Status::invalid_argument(describe(ls, partner) + ": empty logical-block range");
  // Before its first dispatch a launch's pending blocks are the whole grid of the chosen variant.
  const BlockRange fresh{0, ls.kernel->variant(variant).logical_blocks};
  auto contains = [&](const BlockRange& p) { return range.begin >= p.begin && range.end <= p.end; };
  const bool inside = ls.dispatched_once ? std::any_of(ls.pending.begin(), ls.pending.end(), contains) : contains(fresh);
  if (!inside) {
    return Status::invalid_argument(describe(ls, partner) + ": range [" + std::to_string(range.begin) + "," +
                                    std::to_string(range.end) + ") is not pending");
  }
  const bool whole = !ls.dispatched_once && range == fresh;
  if (!whole && !caps.split_range) {
    return Status::unsupported(describe(ls, partner) + ": the kernel cannot run a sub-range on this backend");
  }
  return Status::ok();
}

Status Engine::check_dispatchable(const LaunchState& ls, DispatchId after) const {
  if (ls.pending.empty()) return Status::failed_precondition(describe(ls, false) + ": the launch has no pending blocks");
  if (ls.reached) {
    if (after.valid() && std::none_of(running_.begin(), running_.end(), [&](const RunningDispatch& r) { return r.id == after; })) {
      return Status::not_found(describe(ls, false) + ": dispatch " + std::to_string(after.value) + " to run behind is not running");
    }
    return Status::ok();
  }
  // Not yet reached: only as the next launch of its stream, behind the dispatch running the whole
  // launch before it.
  const auto who = [&] { return describe(ls, false) + " behind dispatch " + std::to_string(after.value); };
  if (!after.valid()) return Status::failed_precondition(describe(ls, false) + ": the launch is queued, not ready");
  auto it = std::find_if(running_.begin(), running_.end(), [&](const RunningDispatch& r) { return r.id == after; });
  if (it == running_.end()) return Status::not_found(who() + ": it is not running");
  if (it->launches.size() != 1) return Status::unsupported(who() + ": a fused dispatch has no single next launch");
  const TenantState& t = tenants_[static_cast<size_t>(ls.record.tenant.value)];
  const auto pos = std::find(t.stream.begin(), t.stream.end(), ls.record.id.value);
  if (pos == t.stream.begin() || pos == t.stream.end() || *(pos - 1) != it->launches[0].value) {
    return Status::failed_precondition(who() + ": that dispatch does not run the launch before it in its stream");
  }
  const LaunchState& prev = L(it->launches[0].value);
  if (!prev.pending.empty() || prev.running != 1) {
    return Status::failed_precondition(who() + ": it runs only part of launch " + std::to_string(prev.record.id.value));
  }
  if (prev.successor >= 0) {
    return Status::failed_precondition(who() + ": launch " + std::to_string(prev.successor) + " is already queued behind it");
  }
  return Status::ok();
}

Result<DispatchId> Engine::dispatch(LaunchId launch, const Placement& requested, DispatchId after) {
  LaunchState* ls = launch_state(launch);
  if (!ls) return Status::failed_precondition("dispatch: launch " + std::to_string(launch.value) + " does not exist");
  CONCORD_RETURN_IF_ERROR(check_dispatchable(*ls, after));
  const DeviceSpec& dev = backend_.device();
  const Capabilities caps = backend_.capabilities(*ls->kernel);
  Placement p = requested;
  auto who = [&] { return describe(*ls, false); };
  if (p.sms.empty()) return Status::invalid_argument(who() + ": empty SM set");
  if (p.sms.span() > dev.sm_count) {
    return Status::invalid_argument(who() + ": SM set " + p.sms.to_string() + " names SMs beyond the device's " +
                                    std::to_string(dev.sm_count));
  }
  if (p.tlp < 0) return Status::invalid_argument(who() + ": tlp must be >= 0");
  if (p.form == LaunchForm::persistent && !caps.persistent_form) {
    return Status::unsupported(who() + ": the kernel has no persistent form (opaque kernel)");
  }
  if (p.tlp > 0 && (p.form != LaunchForm::persistent || !caps.tlp)) {
    return Status::unsupported(who() + ": a TLP limit needs the persistent form");
  }
  if (p.tight_tlp < 0) return Status::invalid_argument(who() + ": tight_tlp must be >= 0");
  if (p.tight_tlp > 0) {
    if (p.form != LaunchForm::persistent || !caps.tlp) return Status::unsupported(who() + ": a TLP limit needs the persistent form");
    if (p.tight_sms.empty()) return Status::invalid_argument(who() + ": tight_tlp given without tight_sms");
  }
  if (bypasses_l1(p.cache) && !caps.l1_bypass) return Status::unsupported(who() + ": L1 bypass is not available for this kernel");
  if (evicts_l2_first(p.cache) && !caps.l2_evict_first) {
    return Status::unsupported(who() + ": L2 evict-first is not available for this kernel");
  }
  // A native launch gets its SM set from a green context: TPC-granular.
  if ((p.form == LaunchForm::native || !caps.exact_sm_sets) && p.sms.count() != dev.sm_count) {
    p.sms = dev.round_up_to_tpcs(p.sms);
  }
  const int variant = p.variant >= 0 ? p.variant : (ls->dispatched_once ? ls->variant : ls->kernel->default_variant);
  const int64_t blocks = ls->kernel->variant(std::clamp(variant, 0, ls->kernel->variant_count() - 1)).logical_blocks;
  const BlockRange range = p.range ? *p.range : (ls->dispatched_once ? ls->pending.front() : BlockRange{0, blocks});
  CONCORD_RETURN_IF_ERROR(check_part(*ls, false, variant, range, caps));

  DispatchRequest req;
  req.id = DispatchId{dispatch_base_ + static_cast<int64_t>(dispatch_records_.size())};
  req.parts.push_back(DispatchPart{launch, ls->record.tenant, ls->kernel, variant, range,
                                   p.fusion ? p.fusion->self_parts : 1});
  LaunchState* partner = nullptr;
  int partner_variant = 0;
  if (p.fusion) {
    partner = launch_state(p.fusion->partner);
    if (!partner || !partner->reached || partner->pending.empty() || partner == ls) {
      return Status::failed_precondition(who() + ": fusion partner " + std::to_string(p.fusion->partner.value) +
                                         " is not another ready launch");
    }
    if (!ls->reached) return Status::unsupported(who() + ": a queued launch cannot be fused");
    const Capabilities pcaps = backend_.capabilities(*partner->kernel);
    if (!caps.fusion || !pcaps.fusion || p.form != LaunchForm::persistent) {
      return Status::unsupported(who() + ": fusion needs two elastic kernels in the persistent form");
    }
    if (p.fusion->self_parts < 1 || p.fusion->partner_parts < 1) {
      return Status::invalid_argument(who() + ": fusion ratio parts must be >= 1");
    }
    partner_variant = p.fusion->partner_variant >= 0
                          ? p.fusion->partner_variant
                          : (partner->dispatched_once ? partner->variant : partner->kernel->default_variant);
    if (partner_variant >= partner->kernel->variant_count()) {
      return Status::invalid_argument(describe(*partner, true) + ": field 'fusion.partner_variant': kernel has no variant " +
                                      std::to_string(partner_variant));
    }
    BlockRange prange = p.fusion->partner_range;
    if (prange.empty()) {
      prange = partner->dispatched_once
                   ? partner->pending.front()
                   : BlockRange{0, partner->kernel->variant(partner_variant).logical_blocks};
    }
    CONCORD_RETURN_IF_ERROR(check_part(*partner, true, partner_variant, prange, pcaps));
    p.fusion->partner_range = prange;
    p.fusion->partner_variant = partner_variant;
    req.parts.push_back(DispatchPart{partner->record.id, partner->record.tenant, partner->kernel, partner_variant,
                                     prange, p.fusion->partner_parts});
  }
  p.variant = variant;
  p.range = range;
  req.placement = p;
  req.after = after;
  {
    const auto b0 = std::chrono::steady_clock::now();
    // The whole placement, fusion pairs included, by the rule both backends share.
    Status st = backend_.can_implement(req);
    if (!st) st = Status(st.code(), who() + ": " + st.message());
    if (st) st = backend_.dispatch(req);
    stats_.backend_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - b0).count();
    CONCORD_RETURN_IF_ERROR(st);
  }

  // Commit: the blocks now belong to the dispatch.
  auto commit = [&](LaunchState& s, int v, const BlockRange& r) {
    if (!s.dispatched_once) {
      s.dispatched_once = true;
      s.variant = v;
      s.record.logical_blocks = s.kernel->variant(v).logical_blocks;
      s.pending = {BlockRange{0, s.record.logical_blocks}};
      tenants_[static_cast<size_t>(s.record.tenant.value)].queued_dirty = true;
    }
    take_range(s.pending, r);
    ++s.running;
  };
  commit(*ls, variant, range);
  if (partner) commit(*partner, partner_variant, req.parts[1].range);
  refresh_ready(*ls);
  if (partner) refresh_ready(*partner);
  if (!ls->reached) {
    // Behind the whole launch before it in its stream (check_dispatchable).
    const auto it = std::find_if(running_.begin(), running_.end(), [&](const RunningDispatch& r) { return r.id == after; });
    L(it->launches[0].value).successor = launch.value;
  }

  DispatchRecord rec;
  rec.id = req.id;
  rec.placement = p;
  rec.dispatched = backend_.now();
  rec.after = after;
  for (const auto& part : req.parts) {
    rec.launches.push_back(part.launch);
    rec.tenants.push_back(part.tenant);
    rec.ranges.push_back(part.range);
  }
  dispatch_records_.push_back(rec);
  RunningDispatch run{rec.id, rec.launches, rec.tenants, {}, {}, {}, p, rec.ranges, rec.dispatched, after};
  for (const auto& part : req.parts) {
    run.kernels.push_back(part.kernel);
    run.variants.push_back(part.variant);
    run.parts_per_block.push_back(part.parts_per_block);
  }
  running_.push_back(std::move(run));
  ++stats_.dispatches;
  if (options_.observer) options_.observer->on_dispatch(rec);
  return req.id;
}

Status Engine::check_not_queued(const RunningDispatch& r, const char* what) const {
  if (!r.after.valid()) return Status::ok();
  const bool waiting = std::any_of(running_.begin(), running_.end(), [&](const RunningDispatch& x) { return x.id == r.after; });
  if (!waiting) return Status::ok();
  return Status::failed_precondition(std::string(what) + ": dispatch " + std::to_string(r.id.value) +
                                     " is queued behind dispatch " + std::to_string(r.after.value) + ", which still runs");
}
Status Engine::resize(DispatchId id, const SmSet& sms) {
  auto it = std::find_if(running_.begin(), running_.end(), [&](const RunningDispatch& r) { return r.id == id; });
  if (it == running_.end()) return Status::not_found("resize: dispatch " + std::to_string(id.value) + " is not running");
  CONCORD_RETURN_IF_ERROR(check_not_queued(*it, "resize"));
  if (it->placement.form != LaunchForm::persistent) {
    return Status::unsupported("resize: dispatch " + std::to_string(id.value) + " is not persistent");
  }
  if (sms.empty() || sms.span() > backend_.device().sm_count) {
    return Status::invalid_argument("resize: SM set must be non-empty and within the device");
  }
  {
    const auto b0 = std::chrono::steady_clock::now();
    const Status st = backend_.set_sm_set(id, sms);
    stats_.backend_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - b0).count();
    CONCORD_RETURN_IF_ERROR(st);
  }
  it->placement.sms = sms;
  if (options_.observer) options_.observer->on_resize(id, sms, backend_.now());
  return Status::ok();
}

Status Engine::set_tlp(DispatchId id, int tlp, const SmSet& tight_sms, int tight_tlp) {
  auto it = std::find_if(running_.begin(), running_.end(), [&](const RunningDispatch& r) { return r.id == id; });
  if (it == running_.end()) return Status::not_found("set_tlp: dispatch " + std::to_string(id.value) + " is not running");
  CONCORD_RETURN_IF_ERROR(check_not_queued(*it, "set_tlp"));
  if (it->placement.form != LaunchForm::persistent) {
    return Status::unsupported("set_tlp: dispatch " + std::to_string(id.value) + " is not persistent");
  }
  if (tlp < 0 || tight_tlp < 0) return Status::invalid_argument("set_tlp: limits must be >= 0 (0: none)");
  if (tight_tlp > 0 && tight_sms.empty()) return Status::invalid_argument("set_tlp: tight_tlp given without tight_sms");
  {
    const auto b0 = std::chrono::steady_clock::now();
    const Status st = backend_.set_tlp(id, tlp, tight_sms, tight_tlp);
    stats_.backend_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - b0).count();
    CONCORD_RETURN_IF_ERROR(st);
  }
  it->placement.tlp = tlp;
  it->placement.tight_sms = tight_tlp > 0 ? tight_sms : SmSet();
  it->placement.tight_tlp = tight_tlp;
  return Status::ok();
}

Status Engine::preempt(DispatchId id) {
  auto it = std::find_if(running_.begin(), running_.end(), [&](const RunningDispatch& r) { return r.id == id; });
  if (it == running_.end()) return Status::not_found("preempt: dispatch " + std::to_string(id.value) + " is not running");
  CONCORD_RETURN_IF_ERROR(check_not_queued(*it, "preempt"));
  for (LaunchId l : it->launches) {
    // Its unfinished blocks would come back after the next kernel already started behind it.
    if (L(l.value).successor >= 0) {
      return Status::failed_precondition("preempt: dispatch " + std::to_string(id.value) + " has launch " +
                                         std::to_string(L(l.value).successor) + " queued behind it");
    }
  }
  const auto b0 = std::chrono::steady_clock::now();
  const Status st = backend_.preempt(id);
  stats_.backend_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - b0).count();
  return st;
}

Result<TenantId> Engine::join(const TenantInfo& info, std::optional<TenantHints> hints,
                              const std::vector<const KernelSpec*>& kernels) {
  const TenantId id{static_cast<int64_t>(tenants_.size())};
  if (info.name.empty()) return Status::invalid_argument("join: a tenant needs a name");
  if (hints) {
    for (const auto& step : hints->request) {
      if (!step.kernel || step.count < 1) {
        return Status::invalid_argument("join: tenant '" + info.name + "': a hint step needs a kernel and a count >= 1");
      }
    }
  }
  CONCORD_RETURN_IF_ERROR(backend_.prepare_tenant(id, kernels));
  TenantState& t = tenants_.emplace_back();
  t.view = TenantView{id, info, std::move(hints), false};
  t.record.name = info.name;
  t.record.cls = info.cls;
  t.record.latency_target = info.latency_target;
  t.record.joined = started_ ? backend_.now() : 0;
  t.record.begin = -1;
  t.record.finish = -1;
  views_.push_back(t.view);
  newly_joined_.push_back(id);
  return id;
}

Result<int64_t> Engine::arrive(TenantId tenant, Seconds at) {
  TenantState* t = tenant_state(tenant);
  if (!t) return Status::not_found("arrive: no tenant " + std::to_string(tenant.value));
  if (t->view.left) return Status::failed_precondition("arrive: tenant '" + t->view.info.name + "' has left");
  if (!started_) return Status::failed_precondition("arrive: tenant '" + t->view.info.name + "': requests arrive after the clock starts");
  // Completion times come from the device's clock (CUDA events), which can read a few
  // microseconds ahead of the host's: a request that arrives as another ends may be stamped with
  // that end.
  if (!std::isfinite(at) || at < 0 || at > std::max(backend_.now(), latest_end_) + 1e-12) {
    return Status::invalid_argument("arrive: tenant '" + t->view.info.name + "': arrival time " + std::to_string(at) +
                                    " is not between the clock's start and now");
  }
  if (t->open_request >= 0) {
    return Status::failed_precondition("arrive: tenant '" + t->view.info.name + "': request " + std::to_string(t->open_request) +
                                       " has not had its last launch submitted");
  }
  const int64_t index = t->requests_base + static_cast<int64_t>(t->record.requests.size());
  t->record.requests.push_back(RequestRecord{at, -1, -1});
  if (index == 0) t->record.begin = at;
  t->open_request = index;
  t->submitted_in_request = 0;
  return index;
}

Status Engine::submit(TenantId tenant, const LaunchSubmission& launch) {
  TenantState* t = tenant_state(tenant);
  if (!t) return Status::not_found("submit: no tenant " + std::to_string(tenant.value));
  const auto who = [&] { return "submit: tenant '" + t->view.info.name + "'"; };
  if (t->view.left) return Status::failed_precondition(who() + " has left");
  if (!launch.kernel) return Status::invalid_argument(who() + ": a launch needs a kernel");
  if (launch.kernel->variants.empty()) return Status::invalid_argument(who() + ": kernel '" + launch.kernel->name + "' has no variant");
  if (launch.request != t->open_request) {
    return Status::failed_precondition(who() + ": launch for request " + std::to_string(launch.request) +
                                       ", but the open request is " + std::to_string(t->open_request));
  }
  LaunchState ls;
  ls.kernel = launch.kernel;
  ls.last_of_request = launch.last_of_request;
  ls.record.id = LaunchId{launch_base_ + static_cast<int64_t>(launches_.size())};
  ls.record.tenant = tenant;
  ls.record.kernel = launch.kernel->name;
  ls.record.request = launch.request;
  ls.record.index = t->submitted_in_request++;
  ls.record.ready = -1;
  ls.record.start = -1;
  ls.record.logical_blocks = launch.kernel->variant(launch.kernel->default_variant).logical_blocks;
  ls.pending = {BlockRange{0, ls.record.logical_blocks}};
  ls.request_arrival = R(*t, launch.request).arrival;
  if (launch.last_of_request) t->open_request = -1;
  launches_.push_back(std::move(ls));
  ++unfinished_;
  t->stream.push_back(launches_.back().record.id.value);
  t->last_submitted = launches_.back().record.id.value;
  t->last_submitted_request = launch.request;
  t->queued_dirty = true;
  if (t->stream.size() == 1) reach_front(*t, backend_.now());
  return Status::ok();
}

Status Engine::leave(TenantId tenant) {
  TenantState* t = tenant_state(tenant);
  if (!t) return Status::not_found("leave: no tenant " + std::to_string(tenant.value));
  if (t->view.left) return Status::ok();
  if (t->open_request >= 0) {
    return Status::failed_precondition("leave: tenant '" + t->view.info.name + "': request " + std::to_string(t->open_request) +
                                       " has not had its last launch submitted");
  }
  t->view.left = true;
  views_[static_cast<size_t>(tenant.value)].left = true;
  if (t->stream.empty()) {
    t->finished = true;
    if (t->record.finish < 0) t->record.finish = started_ ? backend_.now() : 0;
    newly_left_.push_back(tenant);
  }
  return Status::ok();
}

Status Engine::end_request(TenantId tenant) {
  TenantState* t = tenant_state(tenant);
  if (!t) return Status::not_found("end_request: no tenant " + std::to_string(tenant.value));
  const auto who = [&] { return "end_request: tenant '" + t->view.info.name + "'"; };
  if (t->open_request < 0) return Status::failed_precondition(who() + " has no open request");
  if (t->last_submitted < 0 || t->last_submitted_request != t->open_request) {
    return Status::failed_precondition(who() + ": request " + std::to_string(t->open_request) + " has no launch");
  }
  const int64_t request = t->open_request;
  t->open_request = -1;
  t->queued_dirty = true;
  // Null when it finished and was trimmed since.
  LaunchState* ls = launch_state(LaunchId{t->last_submitted});
  if (ls != nullptr) ls->last_of_request = true;
  if (ls != nullptr && !ls->done) {
    refresh_ready(*ls);
    return Status::ok();
  }
  // Its last launch ended before the source knew it was the last.
  RequestRecord& req = R(*t, request);
  req.end = t->last_finished_end;
  if (options_.observer) options_.observer->on_request_end(tenant, req);
  return source_.on_request_end(*this, tenant, request, req.end);
}

void Engine::discard(TenantState& t, LaunchState& ls) {
  ls.pending.clear();
  ls.record.end = -1;
  ls.done = true;
  --unfinished_;
  t.stream.remove(ls.record.id.value);
  const auto at = std::find(reached_order_.begin(), reached_order_.end(), ls.record.id.value);
  if (at != reached_order_.end()) reached_order_.erase(at);
  t.queued_dirty = true;
  ready_dirty_ = true;
}

Status Engine::drop(TenantId tenant, const std::string& why) {
  TenantState* t = tenant_state(tenant);
  if (!t) return Status::not_found("drop: no tenant " + std::to_string(tenant.value));
  if (t->finished) return Status::ok();
  (void)why;
  t->dropped = true;
  t->view.left = true;
  views_[static_cast<size_t>(tenant.value)].left = true;
  t->open_request = -1;
  // What no dispatch runs will never run; what runs ends as the backend reports it.
  std::vector<int64_t> idle;
  for (int64_t id : t->stream) {
    if (L(id).running == 0) idle.push_back(id);
  }
  for (int64_t id : idle) discard(*t, L(id));
  if (t->stream.empty()) {
    t->finished = true;
    t->record.finish = started_ ? backend_.now() : 0;
    newly_left_.push_back(tenant);
  }
  return Status::ok();
}

bool Engine::all_parts_dropped(const DispatchRecord& rec) const {
  return std::all_of(rec.tenants.begin(), rec.tenants.end(),
                     [&](TenantId t) { return tenants_[static_cast<size_t>(t.value)].dropped; });
}

void Engine::complete_dropped(const Completion& c) {
  DispatchRecord& rec = D(c.dispatch.value);
  running_.erase(std::remove_if(running_.begin(), running_.end(), [&](const RunningDispatch& r) { return r.id == c.dispatch; }),
                 running_.end());
  note_end(rec, c);
  for (LaunchId l : rec.launches) {
    LaunchState& ls = L(l.value);
    TenantState& t = tenants_[static_cast<size_t>(ls.record.tenant.value)];
    if (--ls.running > 0) continue;
    discard(t, ls);
    // Launches queued behind it on its stream (dispatched after it) end with it; those still
    // running come back the same way.
    if (t.stream.empty() && !t.finished) {
      t.finished = true;
      t.record.finish = c.end;
      newly_left_.push_back(ls.record.tenant);
    }
  }
  if (options_.observer) options_.observer->on_dispatch_end(rec);
}

void Engine::reach_front(TenantState& t, Seconds ready_at) {
  LaunchState& ls = L(t.stream.front());
  ls.reached = true;
  ls.ready_seq = reached_++;
  ls.record.ready = ready_at;
  const auto pos = std::upper_bound(reached_order_.begin(), reached_order_.end(), ls.record.id.value, [this](int64_t a, int64_t b) {
    return ready_before(L(a), L(b));
  });
  reached_order_.insert(pos, ls.record.id.value);
  t.queued_dirty = true;
  refresh_ready(ls);
  // A launch dispatched behind the one before it starts with no host in between: not "ready".
  if (!ls.dispatched_once) newly_ready_.push_back(ls.record.id);
}

Status Engine::call(const char* hook, const std::function<Status()>& fn) {
  const auto t0 = std::chrono::steady_clock::now();
  Status s = fn();
  stats_.policy_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ++stats_.policy_calls;
  if (!s) return Status(s.code(), "policy '" + policy_.name() + "' " + hook + ": " + s.message());
  return s;
}

std::string Engine::describe_dispatch(const DispatchRecord& rec) const {
  std::string out;
  for (size_t k = 0; k < rec.launches.size(); ++k) {
    const LaunchState& ls = L(rec.launches[k].value);
    if (k > 0) out += " fused with ";
    out += "tenant '" + tenants_[static_cast<size_t>(ls.record.tenant.value)].view.info.name + "' kernel '" +
           ls.kernel->name + "' (launch " + std::to_string(ls.record.id.value) + ", dispatch " +
           std::to_string(rec.id.value) + ")";
  }
  return out;
}

std::string Engine::describe_running() const {
  std::string out;
  for (const RunningDispatch& r : running_) {
    out += (out.empty() ? "" : "; ") + describe_dispatch(D(r.id.value));
  }
  return out;
}

void Engine::record_late(const Completion& c) {
  if (!known_dispatch(c.dispatch)) return;
  const auto running = std::find_if(running_.begin(), running_.end(), [&](const RunningDispatch& r) { return r.id == c.dispatch; });
  if (running == running_.end()) return;
  running_.erase(running);
  DispatchRecord& rec = D(c.dispatch.value);
  note_end(rec, c);
  if (!c.error) failed_.push_back(rec.id);
  latest_end_ = std::max(latest_end_, c.end);
  for (size_t k = 0; k < rec.launches.size() && k < c.blocks_done.size(); ++k) {
    LaunchState& ls = L(rec.launches[k].value);
    const int64_t done = std::clamp<int64_t>(c.blocks_done[k], 0, rec.ranges[k].size());
    ls.blocks_done += done;
    --ls.running;
    if (done > 0 && (ls.record.start < 0 || c.start < ls.record.start)) ls.record.start = c.start;
    TenantState& t = tenants_[static_cast<size_t>(ls.record.tenant.value)];
    RequestRecord& req = R(t, ls.record.request);
    if (done > 0 && (req.start < 0 || c.start < req.start)) req.start = c.start;
    // Finished only in stream order: a launch that ran to its end behind one that was stopped
    // (queued behind it) does not finish its request.
    if (ls.running > 0 || ls.blocks_done != ls.record.logical_blocks || t.stream.empty() ||
        t.stream.front() != ls.record.id.value) {
      continue;
    }
    ls.pending.clear();
    ls.record.end = c.end;
    ls.done = true;
    t.last_finished_end = c.end;
    --unfinished_;
    t.record.logical_blocks += ls.blocks_done;
    t.stream.pop_front();
    if (ls.last_of_request) req.end = c.end;
    if (t.stream.empty() && t.view.left && !t.finished) {
      t.finished = true;
      t.record.finish = c.end;
    }
  }
}

Status Engine::handle_completion(const Completion& c) {
  if (!known_dispatch(c.dispatch)) {
    return Status::internal("completion of unknown dispatch " + std::to_string(c.dispatch.value));
  }
  DispatchRecord& rec = D(c.dispatch.value);
  if (!c.error && all_parts_dropped(rec)) {
    // Its tenant is gone (a process that died mid-launch): the run goes on without it.
    complete_dropped(c);
    return Status::ok();
  }
  if (!c.error) {
    // A fault on the device: it ends the run, naming the tenant (the backend's message names the
    // tenant by id).
    record_late(c);
    return Status(c.error.code(), describe_dispatch(rec) + " failed on the device: " + c.error.message());
  }
  if (rec.after.valid() && std::any_of(running_.begin(), running_.end(), [&](const RunningDispatch& r) { return r.id == rec.after; })) {
    return Status::internal("completion of dispatch " + std::to_string(c.dispatch.value) + " before that of dispatch " +
                            std::to_string(rec.after.value) + ", which it was queued behind");
  }
  rec.start = c.start;
  rec.end = c.end;
  rec.seen = backend_.now();
  latest_end_ = std::max(latest_end_, c.end);
  rec.preempted = c.preempted;
  rec.blocks_done = c.blocks_done;
  running_.erase(std::remove_if(running_.begin(), running_.end(), [&](const RunningDispatch& r) { return r.id == c.dispatch; }),
                 running_.end());
  if (c.blocks_done.size() != rec.launches.size()) {
    return Status::internal("completion of dispatch " + std::to_string(c.dispatch.value) + " reports the wrong number of parts");
  }
  for (size_t k = 0; k < rec.launches.size(); ++k) {
    LaunchState& ls = L(rec.launches[k].value);
    const BlockRange r = rec.ranges[k];
    const int64_t done = c.blocks_done[k];
    if (done < 0 || done > r.size()) return Status::internal("backend reported " + std::to_string(done) + " blocks done of a range of " + std::to_string(r.size()));
    ls.blocks_done += done;
    give_back_range(ls.pending, BlockRange{r.begin + done, r.end});
    --ls.running;
    refresh_ready(ls);
    if (ls.record.start < 0 || c.start < ls.record.start) ls.record.start = c.start;
    TenantState& t = tenants_[static_cast<size_t>(ls.record.tenant.value)];
    RequestRecord& req = R(t, ls.record.request);
    if (req.start < 0 || c.start < req.start) req.start = c.start;
    if (ls.successor >= 0 && !ls.pending.empty() && ls.running == 0) {
      return Status::internal("launch " + std::to_string(ls.record.id.value) + " came back with " +
                              std::to_string(ls.pending_blocks()) + " blocks not done, but launch " +
                              std::to_string(ls.successor) + " was queued behind it");
    }
    if (!ls.pending.empty() || ls.running > 0) continue;
    if (ls.blocks_done != ls.record.logical_blocks) {
      return Status::internal("launch " + std::to_string(ls.record.id.value) + " finished " + std::to_string(ls.blocks_done) +
                              " of " + std::to_string(ls.record.logical_blocks) + " logical blocks");
    }
    ls.record.end = c.end;
    ls.done = true;
    t.last_finished_end = c.end;
    --unfinished_;
    t.record.logical_blocks += ls.blocks_done;
    if (t.stream.empty() || t.stream.front() != ls.record.id.value) {
      return Status::internal("launch " + std::to_string(ls.record.id.value) + " finished before the launch ahead of it in its stream");
    }
    t.stream.pop_front();
    t.queued_dirty = true;
    reached_order_.erase(std::find(reached_order_.begin(), reached_order_.end(), ls.record.id.value));
    const TenantId tenant = ls.record.tenant;
    const LaunchId launch = ls.record.id;
    const bool ends_request = ls.last_of_request;
    const int64_t request = ls.record.request;
    // The next launch of the stream: ready now, or already on the GPU behind this one (it became
    // ready as this ended).
    if (!t.stream.empty()) reach_front(t, ls.successor >= 0 ? c.end : backend_.now());
    if (ends_request) {
      req.end = c.end;
      if (options_.observer) options_.observer->on_request_end(tenant, req);
    }
    // The source may submit more now (launches_ and the tenant's requests may grow: `ls` and `req`
    // are not used past this point).
    CONCORD_RETURN_IF_ERROR(source_.on_launch_end(*this, tenant, launch, c.end));
    if (ends_request) CONCORD_RETURN_IF_ERROR(source_.on_request_end(*this, tenant, request, c.end));
    if (t.stream.empty() && t.view.left && !t.finished) {
      t.finished = true;
      t.record.finish = c.end;
      newly_left_.push_back(tenant);
    }
  }
  if (options_.observer) options_.observer->on_dispatch_end(rec);
  return Status::ok();
}

Status Engine::notify_joined() {
  while (!newly_joined_.empty()) {
    std::vector<TenantId> batch;
    batch.swap(newly_joined_);
    for (TenantId id : batch) CONCORD_RETURN_IF_ERROR(call("on_tenant_joined", [&] { return policy_.on_tenant_joined(*this, id); }));
  }
  return Status::ok();
}

Status Engine::notify_ready() {
  CONCORD_RETURN_IF_ERROR(notify_joined());
  while (!newly_ready_.empty()) {
    std::vector<LaunchId> batch;
    batch.swap(newly_ready_);
    for (LaunchId id : batch) CONCORD_RETURN_IF_ERROR(call("on_ready", [&] { return policy_.on_ready(*this, id); }));
  }
  while (!newly_left_.empty()) {
    std::vector<TenantId> batch;
    batch.swap(newly_left_);
    for (TenantId id : batch) CONCORD_RETURN_IF_ERROR(call("on_tenant_left", [&] { return policy_.on_tenant_left(*this, id); }));
  }
  return Status::ok();
}

Status Engine::pump_source() {
  auto next = source_.pump(*this);
  if (!next) return Status(next.status().code(), "source '" + source_.name() + "': " + next.status().message());
  source_next_ = *next;
  return Status::ok();
}

bool Engine::all_done() const {
  if (!source_.exhausted() || unfinished_ > 0) return false;
  return std::all_of(tenants_.begin(), tenants_.end(), [](const TenantState& t) { return t.finished; });
}

RunOutcome Engine::run() {
  const auto wall0 = std::chrono::steady_clock::now();
  if (backend_.running() != 0) {
    return {collect(wall0), Status::failed_precondition("engine: the backend must be fresh (nothing running)")};
  }
  Status status = drive();
  if (!status) status = wind_down(std::move(status));
  return {collect(wall0), std::move(status)};
}

Status Engine::wind_down(Status why) {
  Status stopped = Status::ok();
  if (!running_.empty() || backend_.running() > 0) {
    stopped = backend_.abort_all(options_.abort_grace);
    // What ended comes out of advance(): all of it when abort_all stopped everything (native
    // launches on the simulator end within the grace of simulated time); else what ends within
    // a short while (a fault's other dispatches report it too), not waiting on what cannot stop.
    const Seconds deadline = backend_.now() + (stopped ? options_.abort_grace : std::min(options_.abort_grace, 0.2));
    for (int sweeps = 0; backend_.running() > 0 && sweeps < 100000; ++sweeps) {
      auto done = backend_.advance(deadline);
      if (!done) break;
      for (const Completion& c : *done) record_late(c);
      if (done->empty() && backend_.now() >= deadline) break;
    }
  }
  if (failed_.size() > 1) {
    // A fault such as an illegal address poisons the whole device: every dispatch running then
    // fails with it, and the device does not say which one caused it.
    std::string others;
    for (size_t i = 1; i < failed_.size(); ++i) {
      others += (others.empty() ? "" : "; ") + describe_dispatch(D(failed_[i].value));
    }
    why = Status(why.code(), why.message() + "; failed with it (a fault that poisons the device fails every dispatch "
                                             "running then, and the device does not say which one caused it): " + others);
  }
  if (running_.empty()) return why;
  return Status(why.code(), why.message() + "; not ended when the run gave up on them (a native or opaque kernel cannot "
                                            "be preempted): " + describe_running() +
                                (stopped ? "" : " (" + stopped.message() + ")"));
}

RunRecord Engine::collect(std::chrono::steady_clock::time_point wall0) {
  RunRecord out;
  out.policy = policy_.name();
  out.backend = backend_.name();
  out.device = backend_.device().name;
  out.seed = options_.seed;
  for (auto& t : tenants_) {
    if (t.record.begin < 0) t.record.begin = t.record.joined;
    out.makespan = std::max(out.makespan, t.record.finish);
    out.tenants.push_back(std::move(t.record));
  }
  for (auto& l : launches_) out.launches.push_back(std::move(l.record));
  // Dispatches that never ended (the run ended early and they could not be stopped).
  for (const RunningDispatch& r : running_) {
    DispatchRecord& rec = D(r.id.value);
    rec.start = rec.end = rec.seen = -1;
  }
  out.dispatches.assign(std::make_move_iterator(dispatch_records_.begin()), std::make_move_iterator(dispatch_records_.end()));
  stats_.engine_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  stats_.policy = policy_.stats();
  out.stats = stats_;
  return out;
}

Status Engine::drive() {
  if (Status s = source_.open(*this); !s) return Status(s.code(), "source '" + source_.name() + "': " + s.message());
  CONCORD_RETURN_IF_ERROR(notify_joined());
  CONCORD_RETURN_IF_ERROR(call("on_start", [&] { return policy_.on_start(*this); }));
  started_ = true;
  if (options_.before_clock) CONCORD_RETURN_IF_ERROR(options_.before_clock());
  CONCORD_RETURN_IF_ERROR(backend_.start_clock());
  CONCORD_RETURN_IF_ERROR(pump_source());
  CONCORD_RETURN_IF_ERROR(notify_ready());

  while (!all_done()) {
    if (options_.stop && options_.stop->load(std::memory_order_relaxed)) {
      return Status::cancelled("the run was stopped at " + std::to_string(backend_.now()) + " s, as asked" +
                               (running_.empty() ? "" : "; running then: " + describe_running()));
    }
    const Seconds next_tick = ticks_.empty() ? kNever : ticks_.top();
    Seconds until = std::min(source_next_, next_tick);
    if (backend_.running() == 0 && until == kNever) {
      if (unfinished_ == 0) {
        return Status::failed_precondition("source '" + source_.name() + "' has nothing due and nothing runs, but " +
                                           (source_.exhausted() ? "tenants that never left remain"
                                                                : "it is not exhausted") +
                                           ": the run cannot finish");
      }
      return Status::failed_precondition("policy '" + policy_.name() + "' holds " + std::to_string(ready().size()) +
                                         " ready launches with nothing running and no tick requested: the run cannot finish");
    }
    if (backend_.now() >= options_.time_limit) {
      // wind_down() stops what still runs (elastic launches at their next logical block), so the
      // process can exit, and names what does not stop.
      return Status::deadline_exceeded("the run passed its time limit of " + std::to_string(options_.time_limit) + " s" +
                                       (running_.empty() ? "" : "; running then: " + describe_running()));
    }
    until = std::min(until, options_.time_limit);
    auto completions = backend_.advance(until);
    if (!completions) return completions.status();
    // Record every completion of the batch before any hook runs: the backend has already
    // forgotten them all, so a policy reacting to the first must not see the others as running
    // (a resize, set_tlp or preempt of one would find nothing there).
    // In time order; a dispatch queued behind another ends with it at the earliest and has the larger id.
    std::stable_sort(completions->begin(), completions->end(), [](const Completion& a, const Completion& b) {
      return a.end != b.end ? a.end < b.end : a.dispatch < b.dispatch;
    });
    for (size_t i = 0; i < completions->size(); ++i) {
      if (Status s = handle_completion((*completions)[i]); !s) {
        for (size_t j = i + 1; j < completions->size(); ++j) record_late((*completions)[j]);
        return s;
      }
    }
    // Tenants that joined in answer to those completions are known to the policy before it hears of them.
    CONCORD_RETURN_IF_ERROR(notify_joined());
    for (const Completion& c : *completions) {
      CONCORD_RETURN_IF_ERROR(call("on_complete", [&] { return policy_.on_complete(*this, c); }));
      CONCORD_RETURN_IF_ERROR(notify_ready());
    }
    CONCORD_RETURN_IF_ERROR(pump_source());
    CONCORD_RETURN_IF_ERROR(notify_ready());
    bool ticked = false;
    while (!ticks_.empty() && ticks_.top() <= backend_.now()) {
      ticks_.pop();
      ticked = true;
    }
    if (ticked) CONCORD_RETURN_IF_ERROR(call("on_tick", [&] { return policy_.on_tick(*this); }));
    if (!options_.keep_history) trim_history();
  }
  return Status::ok();
}

void Engine::trim_history() {
  while (!launches_.empty() && launches_.front().done) {
    launches_.pop_front();
    ++launch_base_;
  }
  while (!dispatch_records_.empty()) {
    const DispatchId front = dispatch_records_.front().id;
    if (std::any_of(running_.begin(), running_.end(), [&](const RunningDispatch& r) { return r.id == front; })) break;
    dispatch_records_.pop_front();
    ++dispatch_base_;
  }
  for (TenantState& t : tenants_) {
    if (t.finished) {
      // Left and drained: nothing of it is read again but its name and class (policies keep its
      // view); its buffers go, so a daemon that has seen many tenants holds a few words for each.
      if (t.released) continue;
      t.released = true;
      t.requests_base += static_cast<int64_t>(t.record.requests.size());
      std::vector<RequestRecord>().swap(t.record.requests);
      std::vector<QueuedLaunch>().swap(t.queued);
      t.stream.release();
      continue;
    }
    auto& reqs = t.record.requests;
    size_t ended = 0;
    while (ended < reqs.size() && reqs[ended].end >= 0 && t.requests_base + static_cast<int64_t>(ended) != t.open_request) ++ended;
    // Erasing from the front of a vector moves the rest: only in batches.
    if (ended >= 64) {
      reqs.erase(reqs.begin(), reqs.begin() + static_cast<std::ptrdiff_t>(ended));
      t.requests_base += static_cast<int64_t>(ended);
    }
  }
}

}  // namespace

RunOutcome run_engine_outcome(TenantSource& source, Backend& backend, Policy& policy, const EngineOptions& options) {
  Engine engine(source, backend, policy, options);
  return engine.run();
}

Result<RunRecord> run_engine(TenantSource& source, Backend& backend, Policy& policy, const EngineOptions& options) {
  RunOutcome outcome = run_engine_outcome(source, backend, policy, options);
  if (!outcome.status) return outcome.status;
  return std::move(outcome.record);
}

}  // namespace concord
