#include "backend/sim/sim_backend.h"
#include "concord/placement_rule.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace concord::sim {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// One block of the dispatch: a fused block is one kernel whose threads all get the larger body's
// registers (fused_block_variant, as the rule and the CUDA backend count it).
BlockFootprint dispatch_footprint(const DeviceSpec& device, const DispatchRequest& req) {
  const DispatchPart& a = req.parts[0];
  if (req.parts.size() == 1) return footprint_of(device, a.kernel->variant(a.variant));
  const DispatchPart& b = req.parts[1];
  return footprint_of(device, fused_block_variant(a.kernel->variant(a.variant), std::max(1, a.parts_per_block),
                                                  b.kernel->variant(b.variant), std::max(1, b.parts_per_block)));
}

}  // namespace

SimBackend::SimBackend(DeviceSpec device, SimOptions options)
    : device_(std::move(device)), options_(options), model_(device_, options.model) {
  // No driver and no CUDA: results files name the simulator in their place.
  device_.driver_version = device_.cuda_version = device_.cuda_driver_version = "sim";
  free_.assign(static_cast<size_t>(device_.sm_count), SmResources::empty_sm(device_));
}

Capabilities SimBackend::capabilities(const KernelSpec& kernel) const {
  Capabilities c;
  c.l2_evict_first = true;  // opaque kernels: an access-policy window
  if (!kernel.elastic) return c;
  c.persistent_form = c.exact_sm_sets = c.tlp = c.split_range = true;
  c.resize = c.preempt = c.fusion = true;
  c.l1_bypass = true;
  c.block_variants = true;
  return c;
}

SimBackend::Running* SimBackend::find(DispatchId id) {
  for (auto& r : dispatches_) {
    if (r.id == id) return &r;
  }
  return nullptr;
}

const SimBackend::Running* SimBackend::find(DispatchId id) const {
  for (const auto& r : dispatches_) {
    if (r.id == id) return &r;
  }
  return nullptr;
}

Status SimBackend::dispatch(const DispatchRequest& req) {
  if (req.parts.empty() || req.parts.size() > 2) {
    return Status::invalid_argument("sim: a dispatch has one part, or two when fused");
  }
  if (find(req.id)) return Status::already_exists("sim: dispatch " + std::to_string(req.id.value) + " is running");
  for (const auto& dp : req.parts) {
    if (dp.variant < 0 || dp.variant >= dp.kernel->variant_count()) {
      return Status::invalid_argument("sim: kernel '" + dp.kernel->name + "' has no variant " + std::to_string(dp.variant));
    }
  }
  Running r;
  r.id = req.id;
  r.order = next_order_++;
  if (req.after.valid() && find(req.after)) r.after = req.after;
  // The launch's latency, unless the tenant's stream had work on the GPU (then it was queued).
  bool queued_already = false;
  for (const auto& dp : req.parts) {
    for (const Running& q : dispatches_) {
      for (const Part& qp : q.parts) queued_already |= qp.tenant == dp.tenant;
    }
    const auto last = tenant_last_end_.find(dp.tenant.value);
    queued_already |= last != tenant_last_end_.end() && last->second >= now_;
  }
  r.ready_at = queued_already ? now_ : now_ + options_.model.launch_seconds;
  r.placement = req.placement;
  r.allowed = req.placement.sms & device_.all_sms();
  if (r.allowed.empty()) return Status::invalid_argument("sim: the SM set has no SM of this device");
  r.footprint = dispatch_footprint(device_, req);
  const int occupancy = max_resident_blocks(device_, r.footprint);
  if (occupancy == 0) {
    return Status::unsupported("sim: one block of this dispatch does not fit on an SM (threads " +
                               std::to_string(r.footprint.threads) + ", registers " + std::to_string(r.footprint.registers) +
                               ", shared " + std::to_string(r.footprint.shared_bytes) + " bytes)");
  }
  r.per_sm_cap = req.placement.tlp > 0 ? std::min(req.placement.tlp, occupancy) : occupancy;
  if (req.placement.tight_tlp > 0) {
    r.tight_sms = req.placement.tight_sms;
    r.tight_cap = std::min(req.placement.tight_tlp, occupancy);
  }
  r.resident.assign(static_cast<size_t>(device_.sm_count), 0);
  for (const auto& dp : req.parts) {
    Part p;
    p.launch = dp.launch;
    p.tenant = dp.tenant;
    p.kernel = dp.kernel;
    p.variant = &dp.kernel->variant(dp.variant);
    p.range = dp.range;
    p.parts_per_block = std::max(1, dp.parts_per_block);
    p.finished = dp.range.empty();
    r.parts.push_back(p);
  }
  dispatches_.push_back(std::move(r));
  dirty_ = true;
  return Status::ok();
}

void SimBackend::release(Running& r, int sm, int blocks) {
  if (blocks <= 0) return;
  r.resident[static_cast<size_t>(sm)] -= blocks;
  free_[static_cast<size_t>(sm)].give(r.footprint, blocks);
}

Status SimBackend::set_sm_set(DispatchId id, const SmSet& sms) {
  Running* r = find(id);
  if (!r) return Status::not_found("sim: no running dispatch " + std::to_string(id.value));
  if (r->placement.form != LaunchForm::persistent) {
    return Status::unsupported("sim: only persistent dispatches change their SM set while running");
  }
  if (r->preempting) return Status::failed_precondition("sim: dispatch " + std::to_string(id.value) + " is being preempted");
  const SmSet allowed = sms & device_.all_sms();
  if (allowed.empty()) return Status::invalid_argument("sim: the new SM set has no SM of this device");
  // Blocks on SMs leaving the set exit at their next logical-block boundary (modelled as now).
  for (int sm = 0; sm < device_.sm_count; ++sm) {
    if (!allowed.contains(sm)) release(*r, sm, r->resident[static_cast<size_t>(sm)]);
  }
  r->allowed = allowed;
  r->placement.sms = allowed;
  dirty_ = true;
  return Status::ok();
}

Status SimBackend::set_tlp(DispatchId id, int tlp, const SmSet& tight_sms, int tight_tlp) {
  Running* r = find(id);
  if (!r) return Status::not_found("sim: no running dispatch " + std::to_string(id.value));
  if (r->placement.form != LaunchForm::persistent) {
    return Status::unsupported("sim: only persistent dispatches change their TLP while running");
  }
  if (r->placement.fusion) return Status::unsupported("sim: a fused dispatch keeps the TLP it was launched with (as on the GPU)");
  if (tlp < 0 || tight_tlp < 0) return Status::invalid_argument("sim: TLP limits must be >= 0 (0: none)");
  // As on the GPU (launch.cuh, leave_if_over_limit): under a lower limit the blocks over it leave
  // at their next chunk boundary (modelled as now, like a resize); a higher one lets the block
  // scheduler fill the new slots (allocate_blocks at the next event).
  const int occupancy = max_resident_blocks(device_, r->footprint);
  r->per_sm_cap = tlp > 0 ? std::min(tlp, occupancy) : occupancy;
  r->tight_sms = tight_tlp > 0 ? tight_sms : SmSet();
  r->tight_cap = tight_tlp > 0 ? std::min(tight_tlp, occupancy) : 0;
  for (int sm = 0; sm < device_.sm_count; ++sm) {
    const int cap = r->tight_cap > 0 && r->tight_sms.contains(sm) ? r->tight_cap : r->per_sm_cap;
    const int over = r->resident[static_cast<size_t>(sm)] - cap;
    if (over > 0) release(*r, sm, over);
  }
  r->placement.tlp = tlp;
  r->placement.tight_sms = r->tight_sms;
  r->placement.tight_tlp = tight_tlp;
  dirty_ = true;
  return Status::ok();
}

Status SimBackend::preempt(DispatchId id) {
  Running* r = find(id);
  if (!r) return Status::not_found("sim: no running dispatch " + std::to_string(id.value));
  if (r->placement.form != LaunchForm::persistent) {
    return Status::unsupported("sim: only persistent dispatches can be preempted");
  }
  if (r->preempting) return Status::ok();
  r->preempting = true;
  int resident_blocks = 0;
  for (int n : r->resident) resident_blocks += n;
  r->stop_targets.clear();
  for (const Part& p : r->parts) {
    // Blocks in flight finish their current logical block; nothing new is fetched.
    const double in_flight = std::min<double>(static_cast<double>(resident_blocks) * p.parts_per_block,
                                              std::ceil(p.remaining()));
    r->stop_targets.push_back(std::min<double>(static_cast<double>(p.range.size()), std::floor(p.done) + in_flight));
  }
  dirty_ = true;
  return Status::ok();
}

Status SimBackend::abort_all(Seconds grace) {
  for (Running& r : dispatches_) {
    if (r.placement.form == LaunchForm::persistent) CONCORD_RETURN_IF_ERROR(preempt(r.id));
  }
  if (dirty_) {
    allocate_blocks();
    recompute_rates();
    dirty_ = false;
  }
  std::string stuck;
  for (const Running& r : dispatches_) {
    if (r.placement.form == LaunchForm::persistent) continue;
    for (const Part& p : r.parts) {
      if (p.finished) continue;
      const double left = p.remaining();
      if (p.rate > 0 && left / p.rate <= grace) continue;
      stuck += std::string(stuck.empty() ? "" : "; ") + "tenant " + std::to_string(p.tenant.value) + " kernel '" + p.kernel->name + "' dispatch " +
               std::to_string(r.id.value);
    }
  }
  if (!stuck.empty()) {
    return Status::device_error("sim: still running after the " + std::to_string(grace) +
                                " s grace (native launches cannot be preempted): " + stuck);
  }
  return Status::ok();
}

Result<std::vector<int64_t>> SimBackend::progress(DispatchId id) const {
  const Running* r = find(id);
  if (!r) return Status::not_found("sim: no running dispatch " + std::to_string(id.value));
  std::vector<int64_t> out;
  for (const Part& p : r->parts) out.push_back(static_cast<int64_t>(std::floor(p.done + 1e-9)));
  return out;
}

std::map<DispatchId, int> SimBackend::residents_on(int sm) const {
  std::map<DispatchId, int> out;
  for (const auto& r : dispatches_) {
    if (r.resident[static_cast<size_t>(sm)] > 0) out[r.id] = r.resident[static_cast<size_t>(sm)];
  }
  return out;
}

std::vector<double> SimBackend::rates_of(DispatchId id) const {
  std::vector<double> out;
  if (const Running* r = find(id)) {
    for (const Part& p : r->parts) out.push_back(p.rate);
  }
  return out;
}

void SimBackend::allocate_blocks() {
  std::vector<Running*> order;
  for (auto& r : dispatches_) order.push_back(&r);
  // The block scheduler serves the high stream priority first, then older launches, and gives a
  // launch every slot it can take before the next launch gets any. Two levels, as the CUDA backend
  // has them (Placement::priority): > 0 and the rest.
  std::stable_sort(order.begin(), order.end(), [](const Running* a, const Running* b) {
    const bool high_a = a->placement.priority > kNormalStreamPriority;
    const bool high_b = b->placement.priority > kNormalStreamPriority;
    if (high_a != high_b) return high_a;
    return a->order < b->order;
  });
  const std::vector<int> sms_all = device_.all_sms().ids();
  for (Running* r : order) {
    if (r->preempting || r->after.valid()) continue;  // queued behind a running dispatch
    if (r->ready_at > now_) continue;                 // still on its way from the launch
    // A block is worth placing only while some part has logical blocks nobody holds.
    int64_t wanted = 0;
    for (const Part& p : r->parts) {
      if (p.finished) continue;
      wanted = std::max<int64_t>(wanted, static_cast<int64_t>(std::ceil(p.remaining() / p.parts_per_block - 1e-9)));
    }
    int64_t have = 0;
    for (int n : r->resident) have += n;
    const std::vector<int> sms = r->allowed.ids();
    bool placed = true;
    while (have < wanted && placed) {
      placed = false;
      for (int sm : sms) {
        if (have >= wanted) break;
        auto& slot = r->resident[static_cast<size_t>(sm)];
        auto& free = free_[static_cast<size_t>(sm)];
        if (slot < r->cap_on(sm) && free.fits(r->footprint)) {
          ++slot;
          free.take(r->footprint);
          ++have;
          placed = true;
        }
      }
    }
    if (have > 0 && r->start < 0) r->start = now_;
  }
}

double SimBackend::curve_rate(const Part& p, int sms) const {
  return static_cast<double>(p.variant->logical_blocks) / curve_seconds(p.kernel->sm_curve, sms);
}

double SimBackend::model_alone_rate(const Part& p, int sms) {
  const auto key = std::make_tuple(p.kernel, p.variant, sms);
  if (auto it = alone_rate_cache_.find(key); it != alone_rate_cache_.end()) return it->second;
  Entity e;
  e.compute_seconds_per_block = model_.compute_seconds_per_block(*p.kernel, *p.variant);
  e.bytes_per_block = p.variant->bytes_per_block;
  e.warps_per_block = p.variant->warps_per_block();
  const SmGroup g{sms, {{0, max_resident_blocks(device_, *p.variant)}}};
  const double rate = model_.solve(std::span<const Entity>(&e, 1), std::span<const SmGroup>(&g, 1))[0];
  alone_rate_cache_[key] = rate;
  return rate;
}

void SimBackend::recompute_rates() {
  std::vector<Entity> entities;
  std::vector<Part*> owners;
  std::vector<int> first_entity(dispatches_.size(), -1);
  for (size_t d = 0; d < dispatches_.size(); ++d) {
    Running& r = dispatches_[d];
    first_entity[d] = static_cast<int>(entities.size());
    for (Part& p : r.parts) {
      Entity e;
      e.compute_seconds_per_block = model_.compute_seconds_per_block(*p.kernel, *p.variant);
      e.bytes_per_block = p.variant->bytes_per_block;
      e.warps_per_block = p.variant->warps_per_block();
      e.cache = r.placement.cache;
      e.l2_persist = r.placement.l2_persist;
      e.l1_sensitivity = p.kernel->l1_sensitivity;
      e.l2_sensitivity = p.kernel->l2_sensitivity;
      entities.push_back(e);
      owners.push_back(&p);
    }
  }
  // Group SMs with identical residency: the model's cost grows with distinct layouts, not SMs.
  std::map<std::vector<std::pair<int, int>>, int> layouts;
  std::vector<int> sms_used(entities.size(), 0);
  for (int sm = 0; sm < device_.sm_count; ++sm) {
    std::vector<std::pair<int, int>> layout;
    for (size_t d = 0; d < dispatches_.size(); ++d) {
      const int n = dispatches_[d].resident[static_cast<size_t>(sm)];
      if (n == 0) continue;
      for (size_t k = 0; k < dispatches_[d].parts.size(); ++k) {
        const Part& p = dispatches_[d].parts[k];
        if (p.finished) continue;
        const int idx = first_entity[d] + static_cast<int>(k);
        layout.emplace_back(idx, n * p.parts_per_block);
        ++sms_used[static_cast<size_t>(idx)];
      }
    }
    if (!layout.empty()) ++layouts[layout];
  }
  std::vector<SmGroup> groups;
  for (auto& [layout, count] : layouts) groups.push_back(SmGroup{count, layout});
  // A measured curve sets the part's rate alone on its SMs. Slower than the model: a bound per SM
  // inside the solve, so that it also draws only the DRAM traffic of its measured rate (a tenant
  // on part of the GPU that the curve shows far from the device's bandwidth leaves the rest to
  // others); faster: a scale after it.
  std::vector<double> scale_after(owners.size(), 1.0);
  for (size_t i = 0; i < owners.size(); ++i) {
    Part& p = *owners[i];
    const bool has_curve = !p.kernel->sm_curve.empty() && p.variant == &p.kernel->variant(p.kernel->default_variant);
    if (!has_curve || p.finished || sms_used[i] == 0) continue;
    const double modelled = model_alone_rate(p, sms_used[i]);
    if (modelled <= 0) continue;
    const double measured = curve_rate(p, sms_used[i]);
    if (measured < modelled) {
      entities[i].max_rate_per_sm = measured / sms_used[i];
    } else {
      scale_after[i] = measured / modelled;
    }
  }
  const std::vector<double> rates = model_.solve(entities, groups);
  for (size_t i = 0; i < owners.size(); ++i) {
    Part& p = *owners[i];
    p.rate = p.finished ? 0.0 : rates[i];
    p.curve_scale = scale_after[i];
    p.rate *= p.curve_scale;
  }
}

void SimBackend::progress_to(Seconds t) {
  const double dt = t - now_;
  if (dt > 0) {
    for (auto& r : dispatches_) {
      for (size_t k = 0; k < r.parts.size(); ++k) {
        Part& p = r.parts[k];
        if (p.finished) continue;
        const double limit = r.preempting ? r.stop_targets[k] : static_cast<double>(p.range.size());
        p.done = std::min(limit, p.done + p.rate * dt);
      }
    }
  }
  now_ = std::max(now_, t);
}

bool SimBackend::is_done(const Running& r) const {
  return std::all_of(r.parts.begin(), r.parts.end(), [](const Part& p) { return p.finished; });
}

Result<std::vector<Completion>> SimBackend::advance(Seconds until) {
  std::vector<Completion> out;
  while (out.empty()) {
    if (dirty_) {
      allocate_blocks();
      recompute_rates();
      dirty_ = false;
    }
    if (dispatches_.empty()) {
      if (std::isfinite(until)) now_ = std::max(now_, until);
      return out;
    }
    // Time at which each part reaches its end (or its preemption target).
    double t_next = kInf;
    std::vector<std::vector<double>> t_part(dispatches_.size());
    for (size_t d = 0; d < dispatches_.size(); ++d) {
      const Running& r = dispatches_[d];
      for (size_t k = 0; k < r.parts.size(); ++k) {
        const Part& p = r.parts[k];
        double t = kInf;
        if (!p.finished) {
          const double target = r.preempting ? r.stop_targets[k] : static_cast<double>(p.range.size());
          const double left = target - p.done;
          if (left <= 1e-9) t = now_;
          else if (p.rate > 0) t = now_ + left / p.rate;
        }
        t_part[d].push_back(t);
        t_next = std::min(t_next, t);
      }
      // A launch still on its way reaches the block scheduler then: an event.
      if (r.ready_at > now_ && !r.after.valid()) t_next = std::min(t_next, r.ready_at);
    }
    if (t_next > until) {
      if (!std::isfinite(until)) {
        return Status::internal("sim: stalled at t=" + std::to_string(now_) +
                                " s: running dispatches make no progress and nothing will free an SM");
      }
      progress_to(until);
      return out;
    }
    const Seconds before = now_;
    progress_to(t_next);
    for (const Running& r : dispatches_) {
      if (!r.after.valid() && r.ready_at > before && r.ready_at <= now_) dirty_ = true;  // arrived: place its blocks
    }
    const double tolerance = 1e-12 * std::max(1.0, std::abs(t_next));
    for (size_t d = 0; d < dispatches_.size(); ++d) {
      Running& r = dispatches_[d];
      for (size_t k = 0; k < r.parts.size(); ++k) {
        Part& p = r.parts[k];
        if (p.finished || t_part[d][k] > t_next + tolerance) continue;
        p.done = r.preempting ? r.stop_targets[k] : static_cast<double>(p.range.size());
        p.finished = true;
        dirty_ = true;
      }
    }
    for (size_t d = 0; d < dispatches_.size();) {
      Running& r = dispatches_[d];
      if (!is_done(r)) {
        ++d;
        continue;
      }
      Completion c;
      c.dispatch = r.id;
      c.start = r.start >= 0 ? r.start : now_;
      c.end = now_;
      for (const Part& p : r.parts) {
        c.blocks_done.push_back(static_cast<int64_t>(std::llround(p.done)));
        if (p.done < static_cast<double>(p.range.size())) c.preempted = true;
      }
      for (int sm = 0; sm < device_.sm_count; ++sm) release(r, sm, r.resident[static_cast<size_t>(sm)]);
      for (const Part& p : r.parts) tenant_last_end_[p.tenant.value] = now_;
      const DispatchId ended = r.id;
      out.push_back(std::move(c));
      dispatches_.erase(dispatches_.begin() + static_cast<std::ptrdiff_t>(d));
      for (Running& q : dispatches_) {
        // Queued behind the one that ended: it reaches the block scheduler now, as the newest launch.
        if (q.after == ended) {
          q.after = DispatchId{};
          q.order = next_order_++;
        }
      }
      dirty_ = true;
    }
  }
  return out;
}

}  // namespace concord::sim
