#include "policy/pbs/tlp_baselines.h"

#include <algorithm>
#include <charconv>
#include <map>
#include <vector>

#include "mechanism/params.h"
#include "policy/pbs/pbs_search.h"
#include "policy/pbs/tlp_runner.h"

namespace concord::policy {
namespace {

// Fixed TLPs: `fixed` maps tenant index to TLP; absent tenants run at their highest (0).
class FixedTlpPolicy final : public Policy {
 public:
  FixedTlpPolicy(std::string name, SmSharing sharing, std::map<int64_t, int> fixed)
      : name_(std::move(name)), runner_(sharing), fixed_(std::move(fixed)) {}
  std::string name() const override { return name_; }
  Status admits(const WorkloadShape& shape, const DeviceSpec& device) const override { return runner_.admits(name_, shape, device); }
  Status on_start(SchedContext& ctx) override {
    for (const auto& [t, tlp] : fixed_) {
      if (t >= static_cast<int64_t>(ctx.tenants().size())) {
        return Status::invalid_argument(name_ + ": parameter 'tlp." + std::to_string(t) + "' names a tenant the workload does not have");
      }
    }
    return Status::ok();
  }
  Status on_tenant_joined(SchedContext& ctx, TenantId t) override {
    runner_.joined(t);
    auto it = fixed_.find(t.value);
    return runner_.set_tlp(ctx, t, it == fixed_.end() ? 0 : it->second);
  }
  Status on_tenant_left(SchedContext& ctx, TenantId t) override {
    runner_.left(t);
    return runner_.dispatch_ready(ctx);
  }
  Status on_complete(SchedContext& ctx, const Completion& c) override {
    runner_.completed(c);
    return runner_.dispatch_ready(ctx);
  }

 protected:
  Status schedule(SchedContext& ctx) override { return runner_.dispatch_ready(ctx); }

 private:
  std::string name_;
  TlpRunner runner_;
  std::map<int64_t, int> fixed_;
};

// Per-tenant hill climbing on the tenant's own logical blocks per second.
class HillClimbPolicy : public Policy {
 public:
  HillClimbPolicy(SmSharing sharing, Seconds window, Seconds warmup, double tolerance)
      : runner_(sharing), window_(window), warmup_(warmup), tolerance_(tolerance) {}
  std::string name() const override { return "dyncta"; }
  Status admits(const WorkloadShape& shape, const DeviceSpec& device) const override { return runner_.admits(name(), shape, device); }
  Status on_tenant_joined(SchedContext& ctx, TenantId t) override {
    (void)ctx;
    runner_.joined(t);
    climbers_.try_emplace(t.value);
    return Status::ok();
  }
  Status on_tenant_left(SchedContext& ctx, TenantId t) override {
    runner_.left(t);
    return dispatch(ctx);
  }
  Status on_ready(SchedContext& ctx, LaunchId) override { return dispatch(ctx); }
  Status on_complete(SchedContext& ctx, const Completion& c) override {
    runner_.completed(c);
    return dispatch(ctx);
  }
  Status on_tick(SchedContext& ctx) override;

 protected:
  // The cache policy of a tenant, decided when its first launch is dispatched.
  virtual CachePolicy cache_for(const KernelSpec& kernel) const {
    (void)kernel;
    return CachePolicy::normal;
  }
  TlpRunner runner_;

 private:
  struct Climber {
    bool started = false;  // its levels are known and it runs at one of them
    std::vector<int> levels;
    size_t level = 0;
    int direction = -1;  // starts at the highest TLP and tries fewer blocks first
    double last = -1;    // blocks/s in the previous window
  };
  Status dispatch(SchedContext& ctx) {
    for (const ReadyLaunch& r : ctx.ready()) {
      if (!cached_.count(r.tenant.value)) {
        cached_.insert(r.tenant.value);
        runner_.set_cache(r.tenant, cache_for(*r.kernel));
      }
    }
    CONCORD_RETURN_IF_ERROR(runner_.dispatch_ready(ctx));
    if (!tick_pending_ && !ctx.running().empty()) {
      tick_pending_ = true;
      warming_ = true;
      ctx.request_tick(ctx.now() + warmup_);
    }
    return Status::ok();
  }

  Seconds window_, warmup_;
  double tolerance_;
  std::map<int64_t, Climber> climbers_;
  std::set<int64_t> cached_;
  bool tick_pending_ = false;
  bool warming_ = true;
};

Status HillClimbPolicy::on_tick(SchedContext& ctx) {
  tick_pending_ = false;
  if (ctx.running().empty()) return Status::ok();
  tick_pending_ = true;
  if (warming_) {
    CONCORD_RETURN_IF_ERROR(runner_.start_window(ctx));
    warming_ = false;
    ctx.request_tick(ctx.now() + window_);
    return Status::ok();
  }
  auto window = runner_.finish_window(ctx);
  if (!window) return window.status();
  warming_ = true;
  for (const TenantWindow& w : *window) {
    Climber& c = climbers_[w.tenant.value];
    if (!c.started) {
      c.levels = tlp_levels(runner_.max_tlp(ctx, w.tenant));
      c.level = c.levels.size() - 1;
      c.started = true;
      c.last = w.blocks_per_s;
    } else {
      if (w.blocks_per_s < c.last * (1 - tolerance_)) {
        c.direction = -c.direction;  // the last step hurt: go back and beyond
      } else if (w.blocks_per_s <= c.last * (1 + tolerance_)) {
        c.last = w.blocks_per_s;
        continue;  // no clear change: hold
      }
      c.last = w.blocks_per_s;
    }
    const auto next = static_cast<int64_t>(c.level) + c.direction;
    if (next < 0 || next >= static_cast<int64_t>(c.levels.size())) {
      c.direction = -c.direction;
      continue;
    }
    c.level = static_cast<size_t>(next);
    CONCORD_RETURN_IF_ERROR(runner_.set_tlp(ctx, w.tenant, c.levels[c.level]));
  }
  ctx.request_tick(ctx.now() + warmup_);
  return Status::ok();
}

class ModBypassPolicy final : public HillClimbPolicy {
 public:
  ModBypassPolicy(SmSharing sharing, Seconds window, Seconds warmup, double tolerance, double bypass_miss)
      : HillClimbPolicy(sharing, window, warmup, tolerance), bypass_miss_(bypass_miss) {}
  std::string name() const override { return "modbypass"; }
  std::map<std::string, double> stats() const override {
    return {{"kernels_without_pbs_facet", static_cast<double>(runner_.kernels_without_facet().size())}};
  }

 protected:
  // Only a measured L1 miss rate leads to bypassing: a kernel without a `pbs` facet keeps its
  // loads cached (and counts in stats() as kernels_without_pbs_facet).
  CachePolicy cache_for(const KernelSpec& kernel) const override {
    const KernelVariant& v = kernel.variant(kernel.default_variant);
    if (!has_pbs_facet(v)) return CachePolicy::normal;
    auto facet = pbs_facet_of(v);
    return facet && facet->l1_miss_rate >= bypass_miss_ ? CachePolicy::l1_bypass : CachePolicy::normal;
  }

 private:
  double bypass_miss_;
};

struct ClimbOptions {
  SmSharing sharing;
  Seconds window;
  Seconds warmup;
  double tolerance;
};

Result<ClimbOptions> climb_options(const PolicyParams& params) {
  auto sharing = sm_sharing_param(params);
  if (!sharing) return sharing.status();
  auto window = double_param(params, "window", 0.002);
  if (!window) return window.status();
  auto warmup = double_param(params, "warmup", 0.0005);
  if (!warmup) return warmup.status();
  auto tolerance = double_param(params, "tolerance", 0.03);
  if (!tolerance) return tolerance.status();
  if (!(*window > 0) || !(*warmup > 0)) return Status::invalid_argument("parameters 'window' and 'warmup' must be > 0 seconds");
  if (!(*tolerance >= 0 && *tolerance < 1)) return Status::invalid_argument("parameter 'tolerance': must be in [0, 1)");
  return ClimbOptions{*sharing, *window, *warmup, *tolerance};
}

}  // namespace

Result<std::unique_ptr<Policy>> make_maxtlp(const PolicyParams& params) {
  CONCORD_RETURN_IF_ERROR(only_params("maxtlp", params, {"sms"}));
  auto sharing = sm_sharing_param(params);
  if (!sharing) return sharing.status();
  return std::unique_ptr<Policy>(std::make_unique<FixedTlpPolicy>("maxtlp", *sharing, std::map<int64_t, int>{}));
}

Result<std::unique_ptr<Policy>> make_besttlp(const PolicyParams& params) {
  std::map<int64_t, int> fixed;
  for (const auto& [key, value] : params) {
    if (key == "sms") continue;
    int64_t tenant = -1;
    int tlp = -1;
    const bool key_ok = key.rfind("tlp.", 0) == 0 &&
                        std::from_chars(key.data() + 4, key.data() + key.size(), tenant).ptr == key.data() + key.size() && tenant >= 0;
    if (!key_ok) return Status::invalid_argument("besttlp: unknown parameter '" + key + "' (expected sms or tlp.T)");
    if (std::from_chars(value.data(), value.data() + value.size(), tlp).ptr != value.data() + value.size() || tlp < 1) {
      return Status::invalid_argument("besttlp: parameter '" + key + "': must be an integer >= 1, is '" + value + "'");
    }
    fixed[tenant] = tlp;
  }
  auto sharing = sm_sharing_param(params);
  if (!sharing) return sharing.status();
  return std::unique_ptr<Policy>(std::make_unique<FixedTlpPolicy>("besttlp", *sharing, std::move(fixed)));
}

Result<std::unique_ptr<Policy>> make_dyncta(const PolicyParams& params) {
  CONCORD_RETURN_IF_ERROR(only_params("dyncta", params, {"sms", "window", "warmup", "tolerance"}));
  auto o = climb_options(params);
  if (!o) return o.status();
  return std::unique_ptr<Policy>(std::make_unique<HillClimbPolicy>(o->sharing, o->window, o->warmup, o->tolerance));
}

Result<std::unique_ptr<Policy>> make_modbypass(const PolicyParams& params) {
  CONCORD_RETURN_IF_ERROR(only_params("modbypass", params, {"sms", "window", "warmup", "tolerance", "bypass_miss"}));
  auto o = climb_options(params);
  if (!o) return o.status();
  auto miss = double_param(params, "bypass_miss", 0.9);
  if (!miss) return miss.status();
  if (!(*miss > 0 && *miss <= 1)) return Status::invalid_argument("parameter 'bypass_miss': must be in (0, 1]");
  return std::unique_ptr<Policy>(std::make_unique<ModBypassPolicy>(o->sharing, o->window, o->warmup, o->tolerance, *miss));
}

}  // namespace concord::policy
