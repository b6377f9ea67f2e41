#include "policy/pbs/pbs_policy.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <optional>
#include <set>
#include <vector>

#include <nlohmann/json.hpp>

#include "mechanism/params.h"
#include "policy/pbs/pbs_search.h"
#include "policy/pbs/tlp_runner.h"

namespace concord::policy {
namespace {

struct PbsOptions {
  PbsObjective objective = PbsObjective::ws;
  SmSharing sharing = SmSharing::split;
  Seconds window = 0.002;
  Seconds warmup = 0.0005;
  double tolerance = 0.03;
  double drift = 0.25;
  std::string trace;
};

class PbsPolicy final : public Policy {
 public:
  explicit PbsPolicy(PbsOptions o) : o_(std::move(o)), runner_(o_.sharing) {}
  std::string name() const override { return "pbs"; }
  Status admits(const WorkloadShape& shape, const DeviceSpec& device) const override { return runner_.admits(name(), shape, device); }

  Status on_tenant_joined(SchedContext& ctx, TenantId tenant) override {
    runner_.joined(tenant);
    restart(ctx, "joined");
    return Status::ok();
  }
  Status on_tenant_left(SchedContext& ctx, TenantId tenant) override {
    runner_.left(tenant);
    restart(ctx, "left");
    return runner_.dispatch_ready(ctx);
  }
  Status on_ready(SchedContext& ctx, LaunchId) override { return dispatch(ctx); }
  Status on_complete(SchedContext& ctx, const Completion& c) override {
    runner_.completed(c);
    return dispatch(ctx);
  }
  Status on_tick(SchedContext& ctx) override;
  std::map<std::string, double> stats() const override {
    return {{"kernels_without_pbs_facet", static_cast<double>(runner_.kernels_without_facet().size())},
            {"empty_samples", static_cast<double>(empty_samples_)}};
  }

 private:
  Status dispatch(SchedContext& ctx) {
    CONCORD_RETURN_IF_ERROR(runner_.dispatch_ready(ctx));
    // A kernel the search has not seen is a new phase (Section V-E: PBS restarts when a kernel is
    // launched anew); kernels a tenant repeats keep the settled combination.
    if (search_ && !searching_new_) {
      for (size_t i = 0; i < tenants_.size(); ++i) {
        for (const std::string& k : runner_.kernels_of(tenants_[i])) {
          if (!phase_kernels_[i].count(k)) {
            restart(ctx, "new kernel " + k);
            break;
          }
        }
      }
    }
    if (!tick_pending_ && !runner_.active().empty() && !ctx.running().empty()) {
      tick_pending_ = true;
      warming_ = true;
      ctx.request_tick(ctx.now() + o_.warmup);
    }
    return Status::ok();
  }
  // Forgets the current search; the next tick starts one over the active tenants.
  void restart(SchedContext& ctx, const std::string& why) {
    search_.reset();
    extensions_ = 0;
    searching_new_ = true;
    log(ctx, {{"event", "restart"}, {"why", why}});
  }
  Status begin_search(SchedContext& ctx);
  Status apply(SchedContext& ctx, const std::vector<int>& tlps) {
    for (size_t i = 0; i < tenants_.size(); ++i) CONCORD_RETURN_IF_ERROR(runner_.set_tlp(ctx, tenants_[i], tlps[i]));
    return Status::ok();
  }
  void log(SchedContext& ctx, nlohmann::json line) {
    if (o_.trace.empty()) return;
    line["t"] = ctx.now();
    line["tlp_changes"] = runner_.tlp_changes();
    std::ofstream out(o_.trace, std::ios::app);
    out << line.dump() << "\n";
  }

  PbsOptions o_;
  TlpRunner runner_;
  std::optional<PbsSearch> search_;
  bool searching_new_ = true;  // the next window starts a search
  std::vector<TenantId> tenants_;  // the search's tenants, in its order
  std::vector<std::set<std::string>> phase_kernels_;
  std::optional<double> settled_metric_;
  bool tick_pending_ = false;
  bool warming_ = true;
  static constexpr int kMaxExtensions = 4;
  int extensions_ = 0;      // of the open window
  int64_t empty_samples_ = 0;
};

Status PbsPolicy::begin_search(SchedContext& ctx) {
  tenants_ = runner_.active();
  settled_metric_.reset();
  searching_new_ = false;
  if (tenants_.size() < 2) {
    // Nothing co-runs: the tenant runs at its highest TLP.
    for (TenantId t : tenants_) CONCORD_RETURN_IF_ERROR(runner_.set_tlp(ctx, t, 0));
    search_.reset();
    return Status::ok();
  }
  std::vector<std::vector<int>> levels;
  for (TenantId t : tenants_) levels.push_back(tlp_levels(runner_.max_tlp(ctx, t)));
  auto s = PbsSearch::make(std::move(levels), {o_.objective, o_.tolerance});
  if (!s) return s.status();
  search_ = std::move(*s);
  phase_kernels_.clear();
  for (TenantId t : tenants_) phase_kernels_.push_back(runner_.kernels_of(t));
  return apply(ctx, *search_->next());
}

Status PbsPolicy::on_tick(SchedContext& ctx) {
  tick_pending_ = false;
  if (runner_.active().empty() || ctx.running().empty()) return Status::ok();  // dispatch() asks again
  if (warming_) {
    if (searching_new_) CONCORD_RETURN_IF_ERROR(begin_search(ctx));
    CONCORD_RETURN_IF_ERROR(runner_.start_window(ctx));
    warming_ = false;
    tick_pending_ = true;
    ctx.request_tick(ctx.now() + o_.window);
    return Status::ok();
  }
  auto window = runner_.finish_window(ctx);
  if (!window) return window.status();
  warming_ = true;
  tick_pending_ = true;
  if (searching_new_ || !search_) {
    // Restarted meanwhile (or nothing to search): the next window begins anew.
    ctx.request_tick(ctx.now() + (search_ || searching_new_ ? o_.warmup : o_.window));
    return Status::ok();
  }
  // The search's tenants in its order (one that left has restarted the search).
  std::vector<double> eb;
  for (TenantId t : tenants_) {
    for (const TenantWindow& w : *window) {
      if (w.tenant == t) eb.push_back(w.eb);
    }
  }
  if (eb.size() != tenants_.size()) {
    restart(ctx, "tenants changed");
    ctx.request_tick(ctx.now() + o_.warmup);
    return Status::ok();
  }
  // A window in which a tenant finished no logical block measured nothing about it (its blocks
  // outlast the window, its progress was not yet visible, or it sits between requests): it is
  // not a sample. The window stays open, its counts going on, for up to kMaxExtensions more
  // window lengths; after that it starts afresh (so that a long idle spell does not dilute the
  // rate measured once the tenant runs again). Taken as 0, it failed the alone EB and read FI/HS
  // 0 at that combination.
  if (std::any_of(eb.begin(), eb.end(), [](double v) { return !(v > 0); })) {
    ++empty_samples_;
    log(ctx, {{"event", "extended"}, {"eb", eb}});
    if (++extensions_ > kMaxExtensions) {
      extensions_ = 0;
      CONCORD_RETURN_IF_ERROR(runner_.start_window(ctx));
    }
    warming_ = false;
    ctx.request_tick(ctx.now() + o_.window);
    return Status::ok();
  }
  extensions_ = 0;
  if (!search_->settled()) {
    const std::vector<int> sampled = *search_->next();
    CONCORD_RETURN_IF_ERROR(search_->observe(eb));
    log(ctx, {{"event", "sample"}, {"tlp", sampled}, {"eb", eb}});
    if (search_->settled()) {
      log(ctx, {{"event", "settled"}, {"tlp", search_->choice()}, {"samples", search_->samples()}});
      CONCORD_RETURN_IF_ERROR(apply(ctx, search_->choice()));
    } else {
      CONCORD_RETURN_IF_ERROR(apply(ctx, *search_->next()));
    }
    ctx.request_tick(ctx.now() + o_.warmup);
    return Status::ok();
  }
  // Settled: watch the metric at the chosen combination; a large drift is a new phase.
  auto m = eb_metric(o_.objective, eb, search_->alone_eb());
  if (!m) return m.status();
  if (!settled_metric_) {
    settled_metric_ = *m;
  } else if (*settled_metric_ > 0 && std::abs(*m - *settled_metric_) > o_.drift * *settled_metric_) {
    restart(ctx, "metric drifted");
  }
  ctx.request_tick(ctx.now() + o_.warmup);
  return Status::ok();
}

}  // namespace

Result<std::unique_ptr<Policy>> make_pbs(const PolicyParams& params) {
  CONCORD_RETURN_IF_ERROR(only_params("pbs", params, {"metric", "sms", "window", "warmup", "tolerance", "drift", "trace"}));
  PbsOptions o;
  if (auto it = params.find("metric"); it != params.end()) {
    auto m = pbs_objective_from_string(it->second);
    if (!m) return Status::invalid_argument("parameter 'metric': must be ws, fi or hs, is '" + it->second + "'");
    o.objective = *m;
  }
  auto sharing = sm_sharing_param(params);
  if (!sharing) return sharing.status();
  o.sharing = *sharing;
  auto window = double_param(params, "window", o.window);
  if (!window) return window.status();
  auto warmup = double_param(params, "warmup", o.warmup);
  if (!warmup) return warmup.status();
  auto tolerance = double_param(params, "tolerance", o.tolerance);
  if (!tolerance) return tolerance.status();
  auto drift = double_param(params, "drift", o.drift);
  if (!drift) return drift.status();
  if (!(*window > 0)) return Status::invalid_argument("parameter 'window': must be > 0 seconds");
  if (!(*warmup > 0)) return Status::invalid_argument("parameter 'warmup': must be > 0 seconds");
  if (!(*tolerance >= 0 && *tolerance < 1)) return Status::invalid_argument("parameter 'tolerance': must be in [0, 1)");
  if (!(*drift > 0)) return Status::invalid_argument("parameter 'drift': must be > 0");
  o.window = *window;
  o.warmup = *warmup;
  o.tolerance = *tolerance;
  o.drift = *drift;
  if (auto it = params.find("trace"); it != params.end()) o.trace = it->second;
  return std::unique_ptr<Policy>(std::make_unique<PbsPolicy>(std::move(o)));
}

}  // namespace concord::policy
