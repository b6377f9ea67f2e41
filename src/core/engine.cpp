// The engine loop: ready launches -> policy -> placements -> backend -> completions.
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
  int repeat = 0;                    // index within its step's count
  const KernelSpec* kernel = nullptr;
  const TenantSpec* tenant_spec = nullptr;
  int variant = -1;                 // fixed by the first dispatch
  std::vector<BlockRange> pending;  // sorted, disjoint
  int running = 0;                  // dispatches in flight
  int64_t blocks_done = 0;
  Seconds request_arrival = 0;
  bool dispatched_once = false;
  int64_t successor = -1;           // the request's next launch, when queued behind this one
  int64_t pending_blocks() const {
    int64_t n = 0;
    for (const auto& r : pending) n += r.size();
    return n;
  }
};

struct TenantState {
  const TenantSpec* spec = nullptr;
  TenantRecord record;
  std::vector<Seconds> arrivals;     // pre-drawn arrival times (poisson, timestamps)
  int64_t next_arrival = 0;          // index of the next request to arrive
  std::deque<int64_t> waiting;       // arrived requests not yet started
  int64_t current_request = -1;
  int step = 0;
  int repeat = 0;                    // index within the step's count
  bool finished = false;
};

// The position of the kernel after (step, repeat) of a request: the next repeat of the step, else
// the next step's first (step == steps.size() past the last kernel).
void next_position(const TenantSpec& spec, int& step, int& repeat) {
  if (++repeat >= spec.steps[static_cast<size_t>(step)].count) {
    repeat = 0;
    ++step;
  }
}

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

class Engine final : public SchedContext {
 public:
  Engine(const Workload& w, Backend& b, Policy& p, const EngineOptions& o)
      : workload_(w), backend_(b), policy_(p), options_(o), rng_(o.seed), estimator_(b.device()) {}

  Result<RunRecord> run();

  // SchedContext
  Seconds now() const override { return backend_.now(); }
  const DeviceSpec& device() const override { return backend_.device(); }
  const Workload& workload() const override { return workload_; }
  const Estimator& estimator() const override { return estimator_; }
  Capabilities capabilities(const KernelSpec& k) const override { return backend_.capabilities(k); }
  std::span<const ReadyLaunch> ready() const override;
  std::span<const RunningDispatch> running() const override { return running_; }
  std::mt19937_64& rng() override { return rng_; }
  Result<DispatchId> dispatch(LaunchId launch, const Placement& placement) override {
    return dispatch_impl(launch, placement, DispatchId{});
  }
  Result<DispatchId> queue_next(DispatchId behind, const Placement& placement) override;
  Result<DispatchId> dispatch_after(LaunchId launch, const Placement& placement, DispatchId after) override;
  int launches_after(LaunchId launch) const override;
  const KernelSpec* next_kernel(LaunchId launch) const override;
  Status resize(DispatchId dispatch, const SmSet& sms) override;
  Status set_tlp(DispatchId dispatch, int tlp, const SmSet& tight_sms, int tight_tlp) override;
  Status preempt(DispatchId dispatch) override;
  Result<std::vector<int64_t>> progress(DispatchId dispatch) const override { return backend_.progress(dispatch); }
  void request_tick(Seconds at) override { ticks_.push(at); }
  Status prepare_sm_set(const SmSet& sms, TenantId tenant) override {
    if (started_) return Status::failed_precondition("prepare_sm_set: only in on_start");
    return backend_.prepare_sm_set(sms, tenant);
  }

 private:
  LaunchState* launch_state(LaunchId id) {
    return id.valid() && id.value < static_cast<int64_t>(launches_.size()) ? &launches_[static_cast<size_t>(id.value)] : nullptr;
  }
  Status check_part(const LaunchState& ls, bool partner, int variant, const BlockRange& range,
                    const Capabilities& caps) const;
  Result<DispatchId> dispatch_impl(LaunchId launch, const Placement& placement, DispatchId after);
  // A queued dispatch whose predecessor still runs: no resize, TLP change or preemption yet.
  Status check_not_queued(const RunningDispatch& r, const char* what) const;
  Status handle_completion(const Completion& c);
  Status start_next_launch(TenantState& t);
  LaunchState& create_launch(TenantState& t);
  Status deliver_arrivals();
  Status call(const char* hook, const std::function<Status()>& fn);
  void mark_ready_dirty() { ready_dirty_ = true; }

  const Workload& workload_;
  Backend& backend_;
  Policy& policy_;
  EngineOptions options_;
  std::mt19937_64 rng_;
  Estimator estimator_;
  std::vector<TenantState> tenants_;
  std::vector<LaunchState> launches_;
  std::vector<int64_t> active_;  // launches not yet finished, in creation order
  std::vector<RunningDispatch> running_;
  std::vector<DispatchRecord> dispatch_records_;
  mutable std::vector<ReadyLaunch> ready_;
  mutable bool ready_dirty_ = true;
  std::priority_queue<Seconds, std::vector<Seconds>, std::greater<>> ticks_;
  std::vector<LaunchId> newly_ready_;
  EngineStats stats_;
  bool started_ = false;
};

std::span<const ReadyLaunch> Engine::ready() const {
  if (ready_dirty_) {
    ready_.clear();
    for (int64_t id : active_) {
      const LaunchState& ls = launches_[static_cast<size_t>(id)];
      if (ls.pending.empty()) continue;
      ReadyLaunch r;
      r.id = ls.record.id;
      r.tenant = ls.record.tenant;
      r.tenant_spec = ls.tenant_spec;
      r.kernel = ls.kernel;
      r.step = ls.record.step;
      r.repeat = ls.repeat;
      r.request = ls.record.request;
      r.ready_since = ls.record.ready;
      r.request_arrival = ls.request_arrival;
      r.pending = ls.pending.front();
      r.pending_blocks = ls.pending_blocks();
      r.has_running_dispatch = ls.running > 0;
      ready_.push_back(r);
    }
    std::stable_sort(ready_.begin(), ready_.end(), [](const ReadyLaunch& a, const ReadyLaunch& b) {
      return a.ready_since < b.ready_since;
    });
    ready_dirty_ = false;
  }
  return ready_;
}

// "dispatch of launch N (kernel)": built only when a check fails, off the fast path.
std::string describe(const LaunchState& ls, bool partner) {
  return "dispatch of launch " + std::to_string(ls.record.id.value) + " (" + ls.kernel->name + ")" +
         (partner ? " as fusion partner" : "");
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

Result<DispatchId> Engine::dispatch_impl(LaunchId launch, const Placement& requested, DispatchId after) {
  LaunchState* ls = launch_state(launch);
  if (!ls || ls->pending.empty()) {
    return Status::failed_precondition("dispatch: launch " + std::to_string(launch.value) + " is not ready");
  }
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
  req.id = DispatchId{static_cast<int64_t>(dispatch_records_.size())};
  req.parts.push_back(DispatchPart{launch, ls->record.tenant, ls->kernel, variant, range,
                                   p.fusion ? p.fusion->self_parts : 1});
  LaunchState* partner = nullptr;
  int partner_variant = 0;
  if (p.fusion) {
    partner = launch_state(p.fusion->partner);
    if (!partner || partner->pending.empty() || partner == ls) {
      return Status::failed_precondition(who() + ": fusion partner " + std::to_string(p.fusion->partner.value) +
                                         " is not another ready launch");
    }
    const Capabilities pcaps = backend_.capabilities(*partner->kernel);
    if (!caps.fusion || !pcaps.fusion || p.form != LaunchForm::persistent) {
      return Status::unsupported(who() + ": fusion needs two elastic kernels in the persistent form");
    }
    if (p.fusion->self_parts < 1 || p.fusion->partner_parts < 1) {
      return Status::invalid_argument(who() + ": fusion ratio parts must be >= 1");
    }
    partner_variant = partner->dispatched_once ? partner->variant : partner->kernel->default_variant;
    BlockRange prange = p.fusion->partner_range;
    if (prange.empty()) {
      prange = partner->dispatched_once
                   ? partner->pending.front()
                   : BlockRange{0, partner->kernel->variant(partner_variant).logical_blocks};
    }
    CONCORD_RETURN_IF_ERROR(check_part(*partner, true, partner_variant, prange, pcaps));
    p.fusion->partner_range = prange;
    req.parts.push_back(DispatchPart{partner->record.id, partner->record.tenant, partner->kernel, partner_variant,
                                     prange, p.fusion->partner_parts});
  }
  p.variant = variant;
  p.range = range;
  req.placement = p;
  req.after = after;
  {
    const auto b0 = std::chrono::steady_clock::now();
    const Status st = backend_.dispatch(req);
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
    }
    take_range(s.pending, r);
    ++s.running;
  };
  commit(*ls, variant, range);
  if (partner) commit(*partner, partner_variant, req.parts[1].range);

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
  mark_ready_dirty();
  if (options_.observer) options_.observer->on_dispatch(rec);
  return req.id;
}

int Engine::launches_after(LaunchId launch) const {
  if (!launch.valid() || launch.value >= static_cast<int64_t>(launches_.size())) return 0;
  const LaunchState& ls = launches_[static_cast<size_t>(launch.value)];
  const TenantSpec& spec = *ls.tenant_spec;
  int n = spec.steps[static_cast<size_t>(ls.record.step)].count - ls.repeat - 1;
  for (size_t s = static_cast<size_t>(ls.record.step) + 1; s < spec.steps.size(); ++s) n += spec.steps[s].count;
  return n;
}

const KernelSpec* Engine::next_kernel(LaunchId launch) const {
  if (launches_after(launch) == 0) return nullptr;
  const LaunchState& ls = launches_[static_cast<size_t>(launch.value)];
  int step = ls.record.step, repeat = ls.repeat;
  next_position(*ls.tenant_spec, step, repeat);
  return &ls.tenant_spec->steps[static_cast<size_t>(step)].kernel;
}

Result<DispatchId> Engine::queue_next(DispatchId behind, const Placement& placement) {
  auto it = std::find_if(running_.begin(), running_.end(), [&](const RunningDispatch& r) { return r.id == behind; });
  const std::string who = "queue_next behind dispatch " + std::to_string(behind.value);
  if (it == running_.end()) return Status::not_found(who + ": it is not running");
  if (it->launches.size() != 1) return Status::unsupported(who + ": a fused dispatch has no single next launch");
  const LaunchId prev_id = it->launches[0];
  LaunchState& prev = launches_[static_cast<size_t>(prev_id.value)];
  if (!prev.pending.empty() || prev.running != 1) {
    return Status::failed_precondition(who + ": it runs only part of launch " + std::to_string(prev_id.value));
  }
  if (prev.successor >= 0) {
    return Status::failed_precondition(who + ": launch " + std::to_string(prev.successor) + " is already queued behind it");
  }
  TenantState& t = tenants_[static_cast<size_t>(prev.record.tenant.value)];
  if (t.current_request != prev.record.request || t.step != prev.record.step || t.repeat != prev.repeat) {
    return Status::failed_precondition(who + ": launch " + std::to_string(prev_id.value) + " is not its tenant's latest");
  }
  if (launches_after(prev_id) == 0) {
    return Status::failed_precondition(who + ": launch " + std::to_string(prev_id.value) + " is the last of its request");
  }
  // Advance the tenant to the next kernel and create its launch; undone if the dispatch fails.
  const int step0 = t.step, repeat0 = t.repeat;
  next_position(*t.spec, t.step, t.repeat);
  const LaunchId next_id = create_launch(t).record.id;
  launches_[static_cast<size_t>(prev_id.value)].successor = next_id.value;  // `prev` may have moved
  auto d = dispatch_impl(next_id, placement, behind);
  if (!d) {
    launches_[static_cast<size_t>(prev_id.value)].successor = -1;
    launches_.pop_back();
    active_.pop_back();
    t.step = step0;
    t.repeat = repeat0;
    mark_ready_dirty();
    return d.status();
  }
  return d;
}

Result<DispatchId> Engine::dispatch_after(LaunchId launch, const Placement& placement, DispatchId after) {
  if (std::none_of(running_.begin(), running_.end(), [&](const RunningDispatch& r) { return r.id == after; })) {
    return Status::not_found("dispatch_after: dispatch " + std::to_string(after.value) + " is not running");
  }
  return dispatch_impl(launch, placement, after);
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
    if (launches_[static_cast<size_t>(l.value)].successor >= 0) {
      return Status::failed_precondition("preempt: dispatch " + std::to_string(id.value) + " has launch " +
                                         std::to_string(launches_[static_cast<size_t>(l.value)].successor) + " queued behind it");
    }
  }
  const auto b0 = std::chrono::steady_clock::now();
  const Status st = backend_.preempt(id);
  stats_.backend_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - b0).count();
  return st;
}

Status Engine::call(const char* hook, const std::function<Status()>& fn) {
  const auto t0 = std::chrono::steady_clock::now();
  Status s = fn();
  stats_.policy_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ++stats_.policy_calls;
  if (!s) return Status(s.code(), "policy '" + policy_.name() + "' " + hook + ": " + s.message());
  return s;
}

Status Engine::start_next_launch(TenantState& t) {
  while (t.current_request < 0) {
    if (t.waiting.empty()) return Status::ok();
    t.current_request = t.waiting.front();
    t.waiting.pop_front();
    t.step = 0;
    t.repeat = 0;
  }
  create_launch(t);
  newly_ready_.push_back(launches_.back().record.id);
  return Status::ok();
}

LaunchState& Engine::create_launch(TenantState& t) {
  const TenantSpec& spec = *t.spec;
  const KernelStep& step = spec.steps[static_cast<size_t>(t.step)];
  LaunchState ls;
  ls.kernel = &step.kernel;
  ls.tenant_spec = &spec;
  ls.record.id = LaunchId{static_cast<int64_t>(launches_.size())};
  ls.record.tenant = TenantId{static_cast<int64_t>(&t - tenants_.data())};
  ls.record.kernel = step.kernel.name;
  ls.record.request = t.current_request;
  ls.record.step = t.step;
  ls.repeat = t.repeat;
  ls.record.ready = backend_.now();
  ls.record.start = -1;
  ls.record.logical_blocks = step.kernel.variant(step.kernel.default_variant).logical_blocks;
  ls.pending = {BlockRange{0, ls.record.logical_blocks}};
  ls.request_arrival = t.record.requests[static_cast<size_t>(t.current_request)].arrival;
  launches_.push_back(std::move(ls));
  active_.push_back(launches_.back().record.id.value);
  mark_ready_dirty();
  return launches_.back();
}

Status Engine::handle_completion(const Completion& c) {
  const auto idx = static_cast<size_t>(c.dispatch.value);
  if (c.dispatch.value < 0 || idx >= dispatch_records_.size()) {
    return Status::internal("completion of unknown dispatch " + std::to_string(c.dispatch.value));
  }
  DispatchRecord& rec = dispatch_records_[idx];
  if (rec.after.valid() && std::any_of(running_.begin(), running_.end(), [&](const RunningDispatch& r) { return r.id == rec.after; })) {
    return Status::internal("completion of dispatch " + std::to_string(c.dispatch.value) + " before that of dispatch " +
                            std::to_string(rec.after.value) + ", which it was queued behind");
  }
  rec.start = c.start;
  rec.end = c.end;
  rec.seen = backend_.now();
  rec.preempted = c.preempted;
  rec.blocks_done = c.blocks_done;
  running_.erase(std::remove_if(running_.begin(), running_.end(), [&](const RunningDispatch& r) { return r.id == c.dispatch; }),
                 running_.end());
  if (c.blocks_done.size() != rec.launches.size()) {
    return Status::internal("completion of dispatch " + std::to_string(c.dispatch.value) + " reports the wrong number of parts");
  }
  for (size_t k = 0; k < rec.launches.size(); ++k) {
    LaunchState& ls = launches_[static_cast<size_t>(rec.launches[k].value)];
    const BlockRange r = rec.ranges[k];
    const int64_t done = c.blocks_done[k];
    if (done < 0 || done > r.size()) return Status::internal("backend reported " + std::to_string(done) + " blocks done of a range of " + std::to_string(r.size()));
    ls.blocks_done += done;
    give_back_range(ls.pending, BlockRange{r.begin + done, r.end});
    --ls.running;
    if (ls.record.start < 0 || c.start < ls.record.start) ls.record.start = c.start;
    TenantState& t = tenants_[static_cast<size_t>(ls.record.tenant.value)];
    RequestRecord& req = t.record.requests[static_cast<size_t>(ls.record.request)];
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
    active_.erase(std::find(active_.begin(), active_.end(), ls.record.id.value));
    t.record.logical_blocks += ls.blocks_done;
    if (ls.successor >= 0) {
      // The next kernel was queued behind this one (queue_next): it became ready as this ended.
      launches_[static_cast<size_t>(ls.successor)].record.ready = c.end;
      continue;
    }
    // Next kernel of the request, or the request is done.
    const TenantSpec& spec = *t.spec;
    next_position(spec, t.step, t.repeat);
    if (t.step >= static_cast<int>(spec.steps.size())) {
      req.end = c.end;
      if (options_.observer) options_.observer->on_request_end(ls.record.tenant, req);
      t.current_request = -1;
      if (spec.arrival.kind == ArrivalProcess::Kind::closed_loop && t.next_arrival < spec.requests) {
        t.record.requests[static_cast<size_t>(t.next_arrival)].arrival = c.end;
        t.waiting.push_back(t.next_arrival++);
      }
      if (t.next_arrival >= spec.requests && t.waiting.empty()) {
        t.finished = true;
        t.record.finish = c.end;
        continue;
      }
    }
    CONCORD_RETURN_IF_ERROR(start_next_launch(t));
  }
  mark_ready_dirty();
  if (options_.observer) options_.observer->on_dispatch_end(rec);
  return Status::ok();
}

Status Engine::deliver_arrivals() {
  const Seconds now = backend_.now();
  for (auto& t : tenants_) {
    if (t.spec->arrival.kind == ArrivalProcess::Kind::closed_loop) continue;
    bool arrived = false;
    while (t.next_arrival < t.spec->requests && t.arrivals[static_cast<size_t>(t.next_arrival)] <= now) {
      t.waiting.push_back(t.next_arrival++);
      arrived = true;
    }
    if (arrived && t.current_request < 0) CONCORD_RETURN_IF_ERROR(start_next_launch(t));
  }
  return Status::ok();
}

Result<RunRecord> Engine::run() {
  if (backend_.running() != 0) return Status::failed_precondition("engine: the backend must be fresh (nothing running)");
  CONCORD_RETURN_IF_ERROR(backend_.prepare(workload_));
  const auto wall0 = std::chrono::steady_clock::now();
  tenants_.resize(workload_.tenants.size());
  for (size_t i = 0; i < workload_.tenants.size(); ++i) {
    TenantState& t = tenants_[i];
    const TenantSpec& spec = workload_.tenants[i];
    t.spec = &spec;
    t.record.name = spec.name;
    t.record.cls = spec.cls;
    t.record.latency_target = spec.latency_target;
    t.record.requests.assign(static_cast<size_t>(spec.requests), RequestRecord{0, -1, -1});
    switch (spec.arrival.kind) {
      case ArrivalProcess::Kind::closed_loop:
        t.waiting.push_back(t.next_arrival++);
        break;
      case ArrivalProcess::Kind::poisson: {
        // Each tenant draws from its own stream, so adding a tenant leaves the others' arrivals alone.
        std::mt19937_64 gen(options_.seed * 0x9E3779B97F4A7C15ULL + i + 1);
        std::exponential_distribution<double> gap(spec.arrival.rate_per_s);
        Seconds at = 0;
        for (int r = 0; r < spec.requests; ++r) {
          at += gap(gen);
          t.arrivals.push_back(at);
        }
        break;
      }
      case ArrivalProcess::Kind::timestamps:
        t.arrivals = spec.arrival.timestamps;
        break;
    }
    for (size_t r = 0; r < t.arrivals.size(); ++r) t.record.requests[r].arrival = t.arrivals[r];
    t.record.begin = spec.arrival.kind == ArrivalProcess::Kind::closed_loop ? 0 : t.arrivals.front();
  }
  CONCORD_RETURN_IF_ERROR(call("on_start", [&] { return policy_.on_start(*this); }));
  started_ = true;
  if (options_.before_clock) CONCORD_RETURN_IF_ERROR(options_.before_clock());
  CONCORD_RETURN_IF_ERROR(backend_.start_clock());
  for (auto& t : tenants_) {
    if (!t.waiting.empty()) CONCORD_RETURN_IF_ERROR(start_next_launch(t));
  }

  auto notify_ready = [&]() -> Status {
    while (!newly_ready_.empty()) {
      std::vector<LaunchId> batch;
      batch.swap(newly_ready_);
      for (LaunchId id : batch) CONCORD_RETURN_IF_ERROR(call("on_ready", [&] { return policy_.on_ready(*this, id); }));
    }
    return Status::ok();
  };
  CONCORD_RETURN_IF_ERROR(deliver_arrivals());
  CONCORD_RETURN_IF_ERROR(notify_ready());

  auto all_done = [&] { return std::all_of(tenants_.begin(), tenants_.end(), [](const TenantState& t) { return t.finished; }); };
  while (!all_done()) {
    Seconds next_arrival = kNever;
    for (const auto& t : tenants_) {
      if (t.spec->arrival.kind != ArrivalProcess::Kind::closed_loop && t.next_arrival < t.spec->requests) {
        next_arrival = std::min(next_arrival, t.arrivals[static_cast<size_t>(t.next_arrival)]);
      }
    }
    const Seconds next_tick = ticks_.empty() ? kNever : ticks_.top();
    Seconds until = std::min(next_arrival, next_tick);
    if (backend_.running() == 0 && until == kNever) {
      return Status::failed_precondition("policy '" + policy_.name() + "' holds " + std::to_string(ready().size()) +
                                         " ready launches with nothing running and no tick requested: the run cannot finish");
    }
    if (backend_.now() >= options_.time_limit) {
      return Status::failed_precondition("run exceeded its time limit of " + std::to_string(options_.time_limit) + " s");
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
    for (const Completion& c : *completions) CONCORD_RETURN_IF_ERROR(handle_completion(c));
    for (const Completion& c : *completions) {
      CONCORD_RETURN_IF_ERROR(call("on_complete", [&] { return policy_.on_complete(*this, c); }));
      CONCORD_RETURN_IF_ERROR(notify_ready());
    }
    CONCORD_RETURN_IF_ERROR(deliver_arrivals());
    CONCORD_RETURN_IF_ERROR(notify_ready());
    bool ticked = false;
    while (!ticks_.empty() && ticks_.top() <= backend_.now()) {
      ticks_.pop();
      ticked = true;
    }
    if (ticked) CONCORD_RETURN_IF_ERROR(call("on_tick", [&] { return policy_.on_tick(*this); }));
  }

  RunRecord out;
  out.policy = policy_.name();
  out.backend = backend_.name();
  out.device = backend_.device().name;
  out.seed = options_.seed;
  for (auto& t : tenants_) {
    out.makespan = std::max(out.makespan, t.record.finish);
    out.tenants.push_back(std::move(t.record));
  }
  for (auto& l : launches_) out.launches.push_back(std::move(l.record));
  out.dispatches = std::move(dispatch_records_);
  stats_.engine_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  out.stats = stats_;
  return out;
}

}  // namespace

Result<RunRecord> run_workload(const Workload& workload, Backend& backend, Policy& policy, const EngineOptions& options) {
  if (workload.tenants.empty()) return Status::invalid_argument("workload '" + workload.name + "' has no tenants");
  Engine engine(workload, backend, policy, options);
  return engine.run();
}

}  // namespace concord
