// The requests a policy makes of the engine (dispatch, resize, TLP, preemption): what the engine's
// own state decides (the launch, its pending blocks, its variant, stream order) is checked here;
// the placement itself by the placement rule (concord/placement_rule.h), through the backend.
#include "core/engine_impl.h"

namespace concord::engine_impl {

Status Engine::check_part(const LaunchState& ls, bool partner, int variant, const BlockRange& range) const {
  if (variant < 0 || variant >= ls.kernel->variant_count()) {
    return Status::invalid_argument(describe(ls, partner) + ": kernel has no variant " + std::to_string(variant));
  }
  if (ls.dispatched_once && variant != ls.variant) {
    return Status::invalid_argument(describe(ls, partner) + ": the launch already runs variant " +
                                    std::to_string(ls.variant) + "; a launch keeps one variant");
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
  const LaunchState& prev = launch_at(it->launches[0].value);
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
  // What the placement may ask of the device and the kernels is the placement rule's to say
  // (backend_.can_implement below); the engine checks what its own state decides. A native launch
  // gets its SM set from a green context: TPC-granular (a set the rule will refuse is left as is).
  if ((p.form == LaunchForm::native || !caps.exact_sm_sets) && !p.sms.empty() && p.sms.span() <= dev.sm_count &&
      p.sms.count() != dev.sm_count) {
    p.sms = dev.round_up_to_tpcs(p.sms);
  }
  const int variant = p.variant >= 0 ? p.variant : (ls->dispatched_once ? ls->variant : ls->kernel->default_variant);
  const int64_t blocks = ls->kernel->variant(std::clamp(variant, 0, ls->kernel->variant_count() - 1)).logical_blocks;
  const BlockRange range = p.range ? *p.range : (ls->dispatched_once ? ls->pending.front() : BlockRange{0, blocks});
  CONCORD_RETURN_IF_ERROR(check_part(*ls, false, variant, range));

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
    CONCORD_RETURN_IF_ERROR(check_part(*partner, true, partner_variant, prange));
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
    launch_at(it->launches[0].value).successor = launch.value;
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
    if (launch_at(l.value).successor >= 0) {
      return Status::failed_precondition("preempt: dispatch " + std::to_string(id.value) + " has launch " +
                                         std::to_string(launch_at(l.value).successor) + " queued behind it");
    }
  }
  const auto b0 = std::chrono::steady_clock::now();
  const Status st = backend_.preempt(id);
  stats_.backend_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - b0).count();
  return st;
}

}  // namespace concord::engine_impl
