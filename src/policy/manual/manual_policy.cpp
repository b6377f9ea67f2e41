#include "policy/manual/manual_policy.h"

#include <charconv>
#include <vector>

#include "mechanism/params.h"

namespace concord::policy {
namespace {

Result<int64_t> parse_int(const std::string& s, const std::string& what) {
  int64_t v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || ptr != s.data() + s.size() || v < 0) {
    return Status::invalid_argument(what + ": not a non-negative integer: '" + s + "'");
  }
  return v;
}

}  // namespace

Result<SmSet> parse_sm_list(const std::string& text) {
  SmSet out;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = text.find(',', start);
    const std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    const size_t dash = item.find('-');
    auto lo = parse_int(item.substr(0, dash), "SM list '" + text + "'");
    if (!lo) return lo.status();
    int64_t hi = *lo;
    if (dash != std::string::npos) {
      auto h = parse_int(item.substr(dash + 1), "SM list '" + text + "'");
      if (!h) return h.status();
      hi = *h;
    }
    if (hi < *lo || hi >= kMaxSms) return Status::invalid_argument("SM list '" + text + "': bad range '" + item + "'");
    for (int64_t s = *lo; s <= hi; ++s) out.add(static_cast<int>(s));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

Status ManualPolicy::on_start(SchedContext& ctx) {
  const int64_t tenants = static_cast<int64_t>(ctx.tenants().size());
  for (const auto& [t, p] : placements_) {
    if (t >= tenants) return Status::invalid_argument("a placement names tenant " + std::to_string(t) + " of " + std::to_string(tenants));
  }
  if (fuse_ && (fuse_->first >= tenants || fuse_->second >= tenants || fuse_->first == fuse_->second)) {
    return Status::invalid_argument("parameter 'fuse': needs two different tenants of the workload");
  }
  if (form_ == LaunchForm::native) {
    for (int64_t t = 0; t < tenants; ++t) CONCORD_RETURN_IF_ERROR(ctx.prepare_sm_set(placement_for(ctx, TenantId{t}).sms, TenantId{t}));
  }
  return Status::ok();
}

Placement ManualPolicy::placement_for(const SchedContext& ctx, TenantId t) const {
  Placement p;
  p.sms = ctx.device().all_sms();
  p.form = form_;
  if (auto it = placements_.find(t.value); it != placements_.end()) {
    if (it->second.sms) p.sms = *it->second.sms;
    p.tlp = it->second.tlp;
    p.cache = it->second.cache;
  }
  return p;
}

Status ManualPolicy::schedule(SchedContext& ctx) {
  std::vector<ReadyLaunch> waiting;
  for (const ReadyLaunch& r : ctx.ready()) {
    if (!r.has_running_dispatch) waiting.push_back(r);
  }
  if (fuse_) {
    const ReadyLaunch* a = nullptr;
    const ReadyLaunch* b = nullptr;
    for (const auto& r : waiting) {
      if (r.tenant.value == fuse_->first && !a) a = &r;
      if (r.tenant.value == fuse_->second && !b) b = &r;
    }
    const bool busy = std::any_of(ctx.running().begin(), ctx.running().end(), [&](const RunningDispatch& d) {
      return std::any_of(d.tenants.begin(), d.tenants.end(),
                         [&](TenantId t) { return t.value == fuse_->first || t.value == fuse_->second; });
    });
    if (a && b) {
      Placement p = placement_for(ctx, a->tenant);
      p.form = LaunchForm::persistent;
      p.fusion = Fusion{b->id, {}, ratio_.first, ratio_.second};
      auto d = ctx.dispatch(a->id, p);
      if (!d) return d.status();
    } else if (!busy) {
      // One of the pair has nothing left: run the other alone.
      for (const ReadyLaunch* r : {a, b}) {
        if (!r) continue;
        auto d = ctx.dispatch(r->id, placement_for(ctx, r->tenant));
        if (!d) return d.status();
      }
    }
  }
  for (const ReadyLaunch& r : waiting) {
    if (fuse_ && (r.tenant.value == fuse_->first || r.tenant.value == fuse_->second)) continue;
    auto d = ctx.dispatch(r.id, placement_for(ctx, r.tenant));
    if (!d) return d.status();
  }
  return Status::ok();
}

Result<std::unique_ptr<Policy>> make_manual(const PolicyParams& params) {
  std::map<int64_t, ManualPolicy::TenantPlacement> placements;
  LaunchForm form = LaunchForm::native;
  std::optional<std::pair<int64_t, int64_t>> fuse;
  std::pair<int, int> ratio{1, 1};
  for (const auto& [key, value] : params) {
    const size_t dot = key.find('.');
    const std::string name = key.substr(0, dot);
    if (dot != std::string::npos) {
      auto t = parse_int(key.substr(dot + 1), "parameter '" + key + "'");
      if (!t) return t.status();
      auto& p = placements[*t];
      if (name == "sms") {
        auto sms = parse_sm_list(value);
        if (!sms) return sms.status();
        if (sms->empty()) return Status::invalid_argument("parameter '" + key + "': empty SM set");
        p.sms = *sms;
      } else if (name == "tlp") {
        auto tlp = int_param({{key, value}}, key, 0, 1);
        if (!tlp) return tlp.status();
        p.tlp = *tlp;
      } else if (name == "cache") {
        auto c = cache_policy_from_string(value);
        if (!c) return Status::invalid_argument("parameter '" + key + "': unknown cache policy '" + value + "'");
        p.cache = *c;
      } else {
        return Status::invalid_argument("policy 'manual' has no parameter '" + key + "'");
      }
    } else if (key == "form") {
      if (value == "native") form = LaunchForm::native;
      else if (value == "persistent") form = LaunchForm::persistent;
      else return Status::invalid_argument("parameter 'form': native or persistent, got '" + value + "'");
    } else if (key == "fuse" || key == "ratio") {
      const size_t sep = value.find(key == "fuse" ? '+' : ':');
      if (sep == std::string::npos) {
        return Status::invalid_argument("parameter '" + key + "': expected " + (key == "fuse" ? "A+B" : "a:b"));
      }
      auto x = parse_int(value.substr(0, sep), "parameter '" + key + "'");
      auto y = parse_int(value.substr(sep + 1), "parameter '" + key + "'");
      if (!x) return x.status();
      if (!y) return y.status();
      if (key == "fuse") fuse = std::make_pair(*x, *y);
      else ratio = {static_cast<int>(*x), static_cast<int>(*y)};
    } else {
      return Status::invalid_argument("policy 'manual' has no parameter '" + key + "'");
    }
  }
  for (const auto& [t, p] : placements) {
    if (p.tlp > 0 && form != LaunchForm::persistent) {
      return Status::invalid_argument("parameter 'tlp." + std::to_string(t) + "': a TLP needs form=persistent");
    }
  }
  return std::unique_ptr<Policy>(std::make_unique<ManualPolicy>(std::move(placements), form, fuse, ratio));
}

}  // namespace concord::policy
